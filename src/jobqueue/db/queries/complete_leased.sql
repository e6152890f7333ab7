-- Ends a batch of attempts of workers over HTTP (http_workers/service.py), each as its
-- worker reported it done: completed, with its result; or cancelled when its job was
-- asked to stop meanwhile (a job asked to stop ends cancelled whatever its handler
-- did, as a Python worker's does). One statement for both, so that a batch of outcomes
-- costs one round trip. $1: the job ids; $2: {"<id>": claim token, ...}; $3: the
-- worker; $4: {"<id>": result, ...} for the handlers that returned something, or
-- NULL. Fenced as complete.sql is, with the same primary-key lookup per id (see there
-- why the ids come through ARRAY(SELECT unnest($1))). Returns the ids ended, with
-- their status: the writes accepted.
-- $5 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH done AS (
    UPDATE {schema}.jobs AS j
    SET status = CASE WHEN j.cancel_requested_at IS NULL THEN 'completed' ELSE 'cancelled' END,
        last_error = CASE WHEN j.cancel_requested_at IS NULL THEN NULL
                          ELSE 'cancelled while running' END,
        result = CASE WHEN j.cancel_requested_at IS NULL THEN $4::jsonb -> j.id::text END,
        lease_expires_at = NULL,
        finished_at = COALESCE($5::timestamptz, now()),
        updated_at = COALESCE($5::timestamptz, now())
    WHERE j.id = ANY(ARRAY(SELECT unnest($1::bigint[])))
      AND j.lease_expires_at IS NOT NULL
      AND j.worker_id = $3
      AND j.claim_token = ($2::jsonb ->> j.id::text)::bigint
    RETURNING j.id, j.status
), told AS (
    SELECT pg_notify({done_channel}, string_agg(id::text, ',')) FROM done GROUP BY id / 300
)
-- Naming "told" makes it run: a WITH query nobody reads is never evaluated.
SELECT id, status FROM done WHERE (SELECT count(*) FROM told) >= 0
