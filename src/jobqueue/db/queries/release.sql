-- Hands unfinished jobs back at shutdown: pending again at once, and the
-- interrupted attempt is not counted (a job asked to stop ends cancelled instead).
-- $1: the job ids; $2: {"<id>": claim token, ...}. Fenced like complete.sql. The NOTIFY wakes the other workers so that they take
-- the jobs over at once.
-- The NOTIFY says "* <queue>": the workers look for its jobs from the start (migration 0011).
-- $4 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH released AS (
    UPDATE {schema}.jobs AS j
    SET status = CASE WHEN j.cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
        attempts = j.attempts - 1,
        run_at = COALESCE($4::timestamptz, now()),
        finished_at = CASE WHEN j.cancel_requested_at IS NOT NULL THEN COALESCE($4::timestamptz, now()) END,
        worker_id = NULL,
        lease_expires_at = NULL,
        started_at = NULL,
        updated_at = COALESCE($4::timestamptz, now())
    WHERE j.id = ANY($1::bigint[])
      AND j.lease_expires_at IS NOT NULL
      AND j.worker_id = $3
      AND j.claim_token = ($2::jsonb ->> j.id::text)::bigint
    RETURNING j.id, j.queue
)
SELECT id, pg_notify({channel}, '* ' || queue) FROM released
