-- Each queue with a limit (or the one named, $1): its limits, how much of each is in
-- use now and how many due jobs wait only because of it (docs/limits.md says how each
-- is counted). Due jobs are counted up to 100,000 per queue and key, so that the
-- cost stays bounded however long the backlog.
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH limited AS (
    SELECT q.*, COALESCE($2::timestamptz, now()) AS t
    FROM {schema}.queues AS q
    WHERE ($1::text IS NULL OR q.name = $1) AND q.limited
), usage AS (
    SELECT l.*,
           (SELECT COALESCE(sum(c.running), 0)::bigint
            FROM (SELECT running FROM {schema}.queue_totals WHERE queue = l.name
                  UNION ALL
                  SELECT running FROM {schema}.queue_count_changes WHERE queue = l.name) AS c
           ) AS running,
           (SELECT count(*) FROM (SELECT 1 FROM {schema}.jobs AS j
                                  WHERE j.status = 'pending' AND j.queue = l.name
                                    AND j.run_at <= l.t LIMIT 100000) AS d) AS due,
           (SELECT count(*) FROM {schema}.queue_starts AS s
            WHERE s.queue = l.name AND l.rate_count IS NOT NULL
              AND s.at > l.t - l.rate_period) AS started
    FROM limited AS l
), keys AS (  -- the keys at their limit, and their due jobs
    SELECT l.name, count(*) AS full_keys, COALESCE(sum(d.n), 0)::bigint AS waiting
    FROM limited AS l
    CROSS JOIN LATERAL (
        SELECT r.concurrency_key AS k
        FROM {schema}.jobs AS r
        WHERE r.status = 'running' AND r.queue = l.name AND r.concurrency_key IS NOT NULL
        GROUP BY r.concurrency_key
        HAVING count(*) >= l.key_limit
    ) AS f
    CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM (SELECT 1 FROM {schema}.jobs AS j
                                   WHERE j.status = 'pending' AND j.queue = l.name
                                     AND j.concurrency_key = f.k AND j.run_at <= l.t
                                   LIMIT 100000) AS p
    ) AS d
    WHERE l.key_limit IS NOT NULL
    GROUP BY l.name
)
SELECT u.name, u.global_limit, u.key_limit, u.rate_count,
       extract(epoch FROM u.rate_period)::integer AS rate_seconds,
       u.key_rate_count, extract(epoch FROM u.key_rate_period)::integer AS key_rate_seconds,
       u.running AS global_in_use,
       CASE WHEN u.global_limit IS NULL THEN 0
            ELSE GREATEST(0, u.due - GREATEST(0, u.global_limit - u.running)) END AS global_waiting,
       COALESCE(k.full_keys, 0) AS keys_at_limit,
       COALESCE(k.waiting, 0) AS key_waiting,
       u.started AS rate_in_use,
       CASE WHEN u.rate_count IS NULL THEN 0
            ELSE GREATEST(0, u.due - GREATEST(0, u.rate_count - u.started)) END AS rate_waiting
FROM usage AS u
LEFT JOIN keys AS k ON k.name = u.name
ORDER BY u.name
