-- Records a batch of failed attempts. A NULL delay means no attempt is left:
-- the job stays failed. Otherwise it is pending again once the delay has passed.
-- Fenced like complete.sql.
UPDATE {schema}.jobs AS j
SET status = CASE WHEN f.delay IS NULL THEN 'failed' ELSE 'pending' END,
    run_at = CASE WHEN f.delay IS NULL THEN j.run_at
                  ELSE now() + make_interval(secs => f.delay) END,
    last_error = f.error,
    worker_id = NULL,
    lease_expires_at = NULL,
    finished_at = CASE WHEN f.delay IS NULL THEN now() END,
    updated_at = now()
FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::float8[]) AS f(id, attempt, error, delay)
WHERE j.id = f.id
  AND j.attempts = f.attempt
  AND j.worker_id = $5
RETURNING j.id
