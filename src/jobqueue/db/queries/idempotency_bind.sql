-- Names job $3 as the answer to idempotency key $2 of principal $1, in the
-- transaction that took the key (idempotency_take.sql).
UPDATE {schema}.idempotency_keys
SET job_id = $3
WHERE COALESCE(principal, '') = COALESCE($1, '') AND key = $2
