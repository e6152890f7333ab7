-- Records a batch of failed attempts, and each in the job's attempt history.
-- $1: the job ids; $2: {"<id>": {"claim": token, "error": text, "traceback": text or
-- null, "delay": seconds or null}, ...}; $3: the worker. A null delay means no attempt
-- is left (or the handler discarded the job): the job stays failed. Otherwise it is
-- pending again once the delay has passed; a job asked to stop meanwhile ends
-- cancelled instead, never retried. Fenced like complete.sql, and for the
-- same reason without a join; only accepted writes reach the history.
-- $4 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH failed AS (
    UPDATE {schema}.jobs AS j
    SET (status, run_at, last_error, finished_at) = (
            SELECT CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
                        WHEN f.delay IS NULL THEN 'failed' ELSE 'pending' END,
                   CASE WHEN f.delay IS NULL OR j.cancel_requested_at IS NOT NULL
                        THEN j.run_at ELSE COALESCE($4::timestamptz, now()) + make_interval(secs => f.delay) END,
                   f.error,
                   CASE WHEN f.delay IS NULL OR j.cancel_requested_at IS NOT NULL
                        THEN COALESCE($4::timestamptz, now()) END
            FROM jsonb_to_record($2::jsonb -> j.id::text) AS f(error text, delay float8)
        ),
        worker_id = NULL,
        lease_expires_at = NULL,
        updated_at = COALESCE($4::timestamptz, now())
    WHERE j.id = ANY($1::bigint[])
      AND j.lease_expires_at IS NOT NULL
      AND j.worker_id = $3
      AND j.claim_token = ($2::jsonb -> j.id::text ->> 'claim')::bigint
    RETURNING j.id, j.attempts, j.started_at, j.last_error, j.status
), told AS (  -- the jobs that ended, on the done channel as in complete.sql
    SELECT pg_notify({done_channel}, string_agg(id::text, ','))
    FROM failed WHERE status <> 'pending' GROUP BY id / 300
)
INSERT INTO {schema}.job_attempts (job_id, attempt, worker_id, error, traceback, started_at)
SELECT f.id, f.attempts, $3, f.last_error, $2::jsonb -> f.id::text ->> 'traceback', f.started_at
FROM failed AS f
WHERE (SELECT count(*) FROM told) >= 0
RETURNING job_id AS id
