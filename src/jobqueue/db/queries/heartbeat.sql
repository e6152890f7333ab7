-- Renews the lease of every job this worker still runs, in one statement. $1: the
-- job ids; $2: {"<id>": claim token, ...}. Fenced like complete.sql: a job taken from
-- this worker meanwhile is not renewed. Each row says whether the job was asked to
-- stop, for a worker that missed the NOTIFY.
-- $5 is "now": NULL for the database's clock, a time for a test's (db/store.py).
UPDATE {schema}.jobs AS j
SET lease_expires_at = COALESCE($5::timestamptz, now()) + make_interval(secs => $4)
WHERE j.id = ANY($1::bigint[])
  AND j.lease_expires_at IS NOT NULL
  AND j.worker_id = $3
  AND j.claim_token = ($2::jsonb ->> j.id::text)::bigint
RETURNING j.id, j.cancel_requested_at IS NOT NULL AS cancel_requested
