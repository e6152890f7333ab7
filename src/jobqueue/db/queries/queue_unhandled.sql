-- The pending jobs that wait for a handler, by queue and type: those of a pair that no
-- live worker (heartbeat at most $1 seconds old) serving the queue would claim, for
-- want of a handler of the type (workers claim only the types they have handlers for,
-- claim.sql) or of any worker at all. A worker that claims every type (migration 0024,
-- and a worker of a version before it) takes every type of its queues.
--
-- The distinct (queue, type) pairs of pending jobs are found one probe of
-- jobs_pending_type_idx each, not by reading the jobs; only the jobs of an unhandled
-- pair are counted. The cost grows with the pairs and those jobs, not with the backlog.
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH RECURSIVE pairs (queue, type) AS (
    (SELECT queue, type FROM {schema}.jobs
     WHERE status = 'pending'
     ORDER BY queue, type LIMIT 1)
    UNION ALL
    SELECT n.queue, n.type
    FROM pairs AS p
    CROSS JOIN LATERAL (
        SELECT j.queue, j.type FROM {schema}.jobs AS j
        WHERE j.status = 'pending' AND (j.queue, j.type) > (p.queue, p.type)
        ORDER BY j.queue, j.type LIMIT 1
    ) AS n
), live AS MATERIALIZED (
    SELECT w.queues, w.types, w.any_type OR w.types IS NULL AS any_type
    FROM {schema}.workers AS w
    WHERE w.heartbeat_at >= COALESCE($2::timestamptz, now()) - make_interval(secs => $1)
)
SELECT p.queue, p.type,
       (SELECT count(*) FROM {schema}.jobs AS j
        WHERE j.status = 'pending' AND j.queue = p.queue AND j.type = p.type) AS jobs
FROM pairs AS p
WHERE NOT EXISTS (SELECT 1 FROM live
                  WHERE p.queue = ANY(live.queues)
                    AND (live.any_type OR p.type = ANY(live.types)))
ORDER BY p.queue, p.type
