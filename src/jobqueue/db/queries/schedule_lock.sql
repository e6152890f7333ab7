-- A schedule's row, locked for a change that reads, merges and writes it back: two
-- concurrent PATCHes apply one after the other, neither lost.
SELECT s.*, NULL::text AS last_job_status
FROM {schema}.schedules s
WHERE s.name = $1
FOR UPDATE
