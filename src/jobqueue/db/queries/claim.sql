-- Claims up to $2 due jobs of queue $1 for worker $3, in priority order.
-- SKIP LOCKED lets concurrent workers each take different rows without waiting.
-- "id = ANY(ARRAY(...))" keeps the update on primary-key lookups: a join with the
-- CTE can be planned as a hash join over the whole table, whose cost grows with
-- every finished job kept.
-- $5 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH due AS (
    SELECT id
    FROM {schema}.jobs
    WHERE status = 'pending' AND queue = $1 AND run_at <= COALESCE($5::timestamptz, now())
      -- A paused queue starts nothing (evaluated once per claim, not per row).
      AND NOT EXISTS (SELECT 1 FROM {schema}.queues AS q
                      WHERE q.name = $1 AND q.paused_at IS NOT NULL)
    ORDER BY priority, run_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE {schema}.jobs AS j
SET status = 'running',
    attempts = j.attempts + 1,
    worker_id = $3,
    lease_expires_at = COALESCE($5::timestamptz, now()) + make_interval(secs => $4),
    started_at = COALESCE($5::timestamptz, now()),
    updated_at = COALESCE($5::timestamptz, now()),
    progress = NULL  -- progress belongs to an attempt
WHERE j.id = ANY(ARRAY(SELECT id FROM due))
RETURNING j.id, j.type, j.queue, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
          j.trace_context
