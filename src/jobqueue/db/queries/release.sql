-- Hands unfinished jobs back at shutdown: pending again at once, and the
-- interrupted attempt is not counted. $1: the job ids; $2: {"<id>": attempt, ...}.
-- Fenced like complete.sql. The NOTIFY wakes the other workers so that they take
-- the jobs over at once.
WITH released AS (
    UPDATE {schema}.jobs AS j
    SET status = 'pending',
        attempts = j.attempts - 1,
        run_at = now(),
        worker_id = NULL,
        lease_expires_at = NULL,
        started_at = NULL,
        updated_at = now()
    WHERE j.id = ANY($1::bigint[])
      AND j.worker_id = $3
      AND j.attempts = ($2::jsonb ->> j.id::text)::integer
    RETURNING j.id, j.queue
)
SELECT id, pg_notify({channel}, queue) FROM released
