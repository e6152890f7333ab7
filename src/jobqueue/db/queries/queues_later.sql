-- For each queue of $1, its pending jobs due later: scheduled (never tried) and
-- retrying (waiting out the delay after a failed attempt). The counters do not tell
-- them from due jobs, so they are counted here, up to $2 per queue: the page says
-- "over" past that, and a backlog of millions costs $2 index entries, not millions.
--
-- The claim index (queue, priority, run_at) is read from now onwards, one range per
-- distinct pending priority (found as queues_overview.sql finds them), so the due
-- jobs, however many, are never read. Queues with none are left out.
-- $3 is "now": NULL for the database's clock, a time for a test's (db/store.py).
SELECT q.name,
       count(*) FILTER (WHERE l.attempts = 0) AS scheduled,
       count(*) FILTER (WHERE l.attempts > 0) AS retrying
FROM unnest($1::text[]) AS q (name)
CROSS JOIN LATERAL (
    WITH RECURSIVE priorities (p) AS (
        (SELECT priority FROM {schema}.jobs
         WHERE status = 'pending' AND queue = q.name
         ORDER BY priority LIMIT 1)
        UNION ALL
        SELECT (SELECT priority FROM {schema}.jobs
                WHERE status = 'pending' AND queue = q.name AND priority > priorities.p
                ORDER BY priority LIMIT 1)
        FROM priorities WHERE priorities.p IS NOT NULL
    )
    SELECT j.attempts
    FROM priorities
    CROSS JOIN LATERAL (
        SELECT attempts FROM {schema}.jobs
        WHERE status = 'pending' AND queue = q.name AND priority = priorities.p
          AND run_at > COALESCE($3::timestamptz, now())
    ) AS j
    WHERE priorities.p IS NOT NULL
    LIMIT $2
) AS l
GROUP BY q.name
