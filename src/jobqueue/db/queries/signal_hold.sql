-- The first statement of a handler's wait for a signal (ctx.wait_for_signal): locks
-- the job's row, fenced like complete.sql ($2: the worker, $3: the claim's token), so
-- that signal_wait.sql, next in the transaction, reads the signals after any
-- signal_send.sql that held the lock before it (see signal_send.sql). Returns the id
-- when the attempt still holds the job.
SELECT j.id
FROM {schema}.jobs AS j
WHERE j.id = $1
  AND j.lease_expires_at IS NOT NULL
  AND j.worker_id = $2
  AND j.claim_token = $3
FOR UPDATE
