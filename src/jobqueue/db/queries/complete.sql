-- Ends a batch of attempts: $4 is 'completed', or 'cancelled' for attempts stopped
-- because their job was cancelled ($5: the error to record, or NULL). $1: the job
-- ids; $2: {"<id>": attempt, ...}. Fenced: a row changes only while it is still the
-- same attempt held by the same worker ($3); the ids returned are the writes accepted.
--
-- No join with unnest(): when most rows have worker_id NULL (finished jobs), the
-- planner estimates "worker_id = $3" at one row, scans the whole table and loops over
-- the array for every row; seen at 8 s for 1,500 jobs. Here the only plan is a
-- primary-key lookup per id, and the attempt is looked up in the JSON object.
UPDATE {schema}.jobs AS j
SET status = $4,
    last_error = $5,
    worker_id = NULL,
    lease_expires_at = NULL,
    finished_at = now(),
    updated_at = now()
WHERE j.id = ANY($1::bigint[])
  AND j.worker_id = $3
  AND j.attempts = ($2::jsonb ->> j.id::text)::integer
RETURNING j.id
