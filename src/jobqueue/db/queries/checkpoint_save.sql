-- Saves the cursor a handler passed to ctx.checkpoint (docs/durable.md), which the next
-- claim of the job hands back. Fenced like complete.sql: a stale attempt saves nothing.
-- $1: the job; $2: the cursor as JSON text (NULL: forget it); $3: the worker; $4: the
-- claim's token. Returns the job's id when saved.
UPDATE {schema}.jobs AS j
SET checkpoint = $2::jsonb
WHERE j.id = $1
  AND j.lease_expires_at IS NOT NULL
  AND j.worker_id = $3
  AND j.claim_token = $4
RETURNING j.id
