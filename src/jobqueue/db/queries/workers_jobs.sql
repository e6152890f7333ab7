-- The jobs running now, by worker, for the Workers page: up to $1, from the partial
-- index of running jobs (jobs_lease_idx), so finished jobs cost nothing here.
SELECT *
FROM {schema}.jobs
WHERE status = 'running'
ORDER BY worker_id, started_at, id
LIMIT $1
