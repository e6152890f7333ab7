-- Which of the jobs $1 were asked to stop while they ran: an HTTP worker's completion
-- of one ends it cancelled, as a worker's does (http_workers/service.py). A lookup by
-- primary key each.
SELECT j.id
FROM {schema}.jobs AS j
WHERE j.id = ANY(ARRAY(SELECT unnest($1::bigint[])))
  AND j.cancel_requested_at IS NOT NULL
