-- The pending jobs that wait for a handler, by queue and type: those that no live
-- worker (heartbeat at most $1 seconds old) serving the queue would claim, for want of
-- a handler of the type (workers claim only the types they have handlers for,
-- claim.sql) or of any worker at all. A worker that claims every type (migration 0024,
-- and a worker of a version before it) takes every type of its queues.
--
-- Counted among the first $3 pending jobs of each queue in the order workers claim
-- them, on the claim index: the cost is bounded by $3 per queue, whatever the backlog.
-- An exact count would need an index of pending jobs by type, one more entry that
-- every enqueue pays for (a buffer and a WAL record per job, a third of a bulk
-- enqueue's WAL) for a figure read every few seconds. The queues with pending jobs are
-- found one probe of the claim index each.
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH RECURSIVE queues (queue) AS (
    (SELECT queue FROM {schema}.jobs
     WHERE status = 'pending'
     ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT n.queue
    FROM queues AS q
    CROSS JOIN LATERAL (
        SELECT j.queue FROM {schema}.jobs AS j
        WHERE j.status = 'pending' AND j.queue > q.queue
        ORDER BY j.queue LIMIT 1
    ) AS n
), live AS MATERIALIZED (
    SELECT w.queues, w.types, w.any_type OR w.types IS NULL AS any_type
    FROM {schema}.workers AS w
    WHERE w.heartbeat_at >= COALESCE($2::timestamptz, now()) - make_interval(secs => $1)
), front AS (
    SELECT q.queue, f.type
    FROM queues AS q
    CROSS JOIN LATERAL (
        SELECT j.type FROM {schema}.jobs AS j
        WHERE j.status = 'pending' AND j.queue = q.queue
        ORDER BY j.priority, j.run_at, j.id
        LIMIT $3
    ) AS f
)
SELECT f.queue, f.type, count(*) AS jobs
FROM front AS f
WHERE NOT EXISTS (SELECT 1 FROM live
                  WHERE f.queue = ANY(live.queues)
                    AND (live.any_type OR f.type = ANY(live.types)))
GROUP BY f.queue, f.type
ORDER BY f.queue, f.type
