-- Claims up to $2 due jobs of queue $1 for worker $3, in priority order.
-- SKIP LOCKED lets concurrent workers each take different rows without waiting.
-- "id = ANY(ARRAY(...))" keeps the update on primary-key lookups: a join with the
-- CTE can be planned as a hash join over the whole table, whose cost grows with
-- every finished job kept.
WITH due AS (
    SELECT id
    FROM {schema}.jobs
    WHERE status = 'pending' AND queue = $1 AND run_at <= now()
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
    lease_expires_at = now() + make_interval(secs => $4),
    started_at = now(),
    updated_at = now(),
    progress = NULL  -- progress belongs to an attempt
WHERE j.id = ANY(ARRAY(SELECT id FROM due))
RETURNING j.id, j.type, j.queue, j.payload, j.attempts, j.max_attempts, j.priority
