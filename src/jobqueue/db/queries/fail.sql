-- Records a batch of failed attempts. $1: the job ids; $2: {"<id>": {"attempt": n,
-- "error": text, "delay": seconds or null}, ...}. A null delay means no attempt is
-- left: the job stays failed. Otherwise it is pending again once the delay has
-- passed. Fenced like complete.sql, and for the same reason without a join.
UPDATE {schema}.jobs AS j
SET (status, run_at, last_error, finished_at) = (
        SELECT CASE WHEN f.delay IS NULL THEN 'failed' ELSE 'pending' END,
               CASE WHEN f.delay IS NULL THEN j.run_at
                    ELSE now() + make_interval(secs => f.delay) END,
               f.error,
               CASE WHEN f.delay IS NULL THEN now() END
        FROM jsonb_to_record($2::jsonb -> j.id::text) AS f(error text, delay float8)
    ),
    worker_id = NULL,
    lease_expires_at = NULL,
    updated_at = now()
WHERE j.id = ANY($1::bigint[])
  AND j.worker_id = $3
  AND j.attempts = ($2::jsonb -> j.id::text ->> 'attempt')::integer
RETURNING j.id
