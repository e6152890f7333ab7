-- Renews the lease of every job this worker still runs, in one statement. Fenced
-- like complete.sql: a job taken from this worker meanwhile is not renewed.
UPDATE {schema}.jobs AS j
SET lease_expires_at = now() + make_interval(secs => $4)
FROM unnest($1::bigint[], $2::integer[]) AS h(id, attempt)
WHERE j.id = h.id
  AND j.attempts = h.attempt
  AND j.worker_id = $3
RETURNING j.id
