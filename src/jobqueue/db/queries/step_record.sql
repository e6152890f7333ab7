-- Records a step a handler ran through ctx.step (docs/durable.md), fenced like
-- complete.sql: only the attempt this worker still holds, by its claim, records it.
-- $1: the job; $2: the step's name; $3: its result as JSON text (NULL: none); $4: the
-- worker; $5: the claim's token.
-- FOR SHARE makes the fence hold to the commit: a rescue or a claim that changes the
-- job meanwhile waits for it, or this statement waits for them and reads the job again
-- (a plain INSERT ... SELECT would read the job as it was when the statement began).
-- Returns held: whether the attempt is still this worker's. A step that has a row
-- already (from an attempt that recorded it after this one read its steps) keeps it.
WITH held AS (
    SELECT j.id, j.attempts
    FROM {schema}.jobs AS j
    WHERE j.id = $1
      AND j.lease_expires_at IS NOT NULL
      AND j.worker_id = $4
      AND j.claim_token = $5
    FOR SHARE
), recorded AS (
    INSERT INTO {schema}.job_steps (job_id, name, attempt, result, worker_id)
    SELECT id, $2, attempts, $3::jsonb, $4 FROM held
    ON CONFLICT (job_id, name) DO NOTHING
)
SELECT EXISTS (SELECT 1 FROM held) AS held
