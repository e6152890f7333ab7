-- Records the progress running handlers reported, in one statement. $1: the job ids;
-- $2: {"<id>": {"claim": token, "fraction": 0.4 or null, "message": text or null}, ...};
-- $3: the worker. Fenced like complete.sql: an attempt that ended or was taken from
-- this worker meanwhile is not written.
-- $4 is "now": NULL for the database's clock, a time for a test's (db/store.py).
UPDATE {schema}.jobs AS j
SET progress = ($2::jsonb -> j.id::text) - 'claim'
               || jsonb_build_object('updated_at', COALESCE($4::timestamptz, now()))
WHERE j.id = ANY($1::bigint[])
  AND j.lease_expires_at IS NOT NULL
  AND j.worker_id = $3
  AND j.claim_token = ($2::jsonb -> j.id::text ->> 'claim')::bigint
RETURNING j.id
