-- Every queue with jobs or controls: counts by state (queue_totals plus the changes
-- not folded into it yet, both kept by triggers, so no job is counted here), whether
-- it is paused, and how long its longest-waiting due job has waited. $1: one queue,
-- or NULL for all. Both tables are read in one snapshot: a fold commits both sides
-- at once, so the sum is exact before, during and after it.
--
-- The wait is found with the claim index (queue, priority, run_at): for each
-- distinct pending priority, in turn, the earliest due run_at is the first index
-- entry. The cost grows with the number of priorities in use, not of jobs.
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH counts AS (
    SELECT queue, sum(pending)::bigint AS pending, sum(running)::bigint AS running,
           sum(completed)::bigint AS completed, sum(failed)::bigint AS failed,
           sum(cancelled)::bigint AS cancelled
    FROM (SELECT queue, pending, running, completed, failed, cancelled
          FROM {schema}.queue_totals
          UNION ALL
          SELECT queue, pending, running, completed, failed, cancelled
          FROM {schema}.queue_count_changes) AS c
    WHERE $1::text IS NULL OR queue = $1
    GROUP BY queue
), names AS (
    SELECT queue AS name FROM counts
    WHERE (pending, running, completed, failed, cancelled) <> (0, 0, 0, 0, 0)
    UNION
    SELECT name FROM {schema}.queues WHERE $1::text IS NULL OR name = $1
)
SELECT names.name,
       COALESCE(c.pending, 0) AS pending,
       COALESCE(c.running, 0) AS running,
       COALESCE(c.completed, 0) AS completed,
       COALESCE(c.failed, 0) AS failed,
       COALESCE(c.cancelled, 0) AS cancelled,
       q.paused_at IS NOT NULL AS paused,
       q.paused_at,
       (SELECT extract(epoch FROM COALESCE($2::timestamptz, now()) - min(w.oldest))::float8
        FROM (
            WITH RECURSIVE priorities (p) AS (
                (SELECT priority FROM {schema}.jobs
                 WHERE status = 'pending' AND queue = names.name
                 ORDER BY priority LIMIT 1)
                UNION ALL
                SELECT (SELECT priority FROM {schema}.jobs
                        WHERE status = 'pending' AND queue = names.name
                          AND priority > priorities.p
                        ORDER BY priority LIMIT 1)
                FROM priorities WHERE priorities.p IS NOT NULL
            )
            SELECT (SELECT run_at FROM {schema}.jobs
                    WHERE status = 'pending' AND queue = names.name
                      AND priority = priorities.p AND run_at <= COALESCE($2::timestamptz, now())
                    ORDER BY run_at LIMIT 1) AS oldest
            FROM priorities WHERE priorities.p IS NOT NULL
        ) AS w) AS oldest_pending_seconds
FROM names
LEFT JOIN counts AS c ON c.queue = names.name
LEFT JOIN {schema}.queues AS q ON q.name = names.name
ORDER BY names.name
