-- Appends the lines running attempts logged, in one statement. $1: the job ids;
-- $2: {"<id>": {"claim": token, "log": text, "truncated": bool}, ...}; $3: the worker.
-- Fenced like progress.sql: only an attempt this worker still holds is written, so a
-- stale attempt (its lease lost, its job claimed again) never writes into another's
-- log. The attempt's claim time comes from the row, which the fence makes its own.
INSERT INTO {schema}.job_logs AS l (job_id, attempt, started_at, worker_id, log, truncated)
SELECT j.id, j.attempts, j.started_at, $3, e.log, e.truncated
FROM {schema}.jobs AS j,
     jsonb_to_record($2::jsonb -> j.id::text) AS e(log text, truncated boolean)
WHERE j.id = ANY($1::bigint[])
  AND j.lease_expires_at IS NOT NULL
  AND j.worker_id = $3
  AND j.claim_token = ($2::jsonb -> j.id::text ->> 'claim')::bigint
ON CONFLICT (job_id, attempt, started_at) DO UPDATE
SET log = l.log || EXCLUDED.log,
    truncated = l.truncated OR EXCLUDED.truncated
RETURNING l.job_id AS id
