-- Marks a batch of attempts completed. Fenced: a row changes only while it is
-- still the same attempt held by the same worker (worker_id is set exactly while
-- a job runs, so no status test is needed, and none lets the planner prefer the
-- partial index on running jobs); the ids returned are the writes accepted.
UPDATE {schema}.jobs AS j
SET status = 'completed',
    last_error = NULL,
    worker_id = NULL,
    lease_expires_at = NULL,
    finished_at = now(),
    updated_at = now()
FROM unnest($1::bigint[], $2::integer[]) AS done(id, attempt)
WHERE j.id = done.id
  AND j.attempts = done.attempt
  AND j.worker_id = $3
RETURNING j.id
