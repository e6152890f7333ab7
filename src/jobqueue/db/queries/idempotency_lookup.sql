-- Idempotency key $2 of principal $1, if it is remembered and not expired: the hash
-- of the request that took it, the job it names and that job (NULL columns if
-- retention deleted it). $3 is "now": NULL for the database's clock, a test's time.
SELECT k.request_hash, k.job_id AS key_job_id, j.*
FROM {schema}.idempotency_keys AS k
LEFT JOIN {schema}.jobs AS j ON j.id = k.job_id
WHERE COALESCE(k.principal, '') = COALESCE($1, '') AND k.key = $2
  AND k.expires_at > COALESCE($3::timestamptz, now())
