-- Every worker with the jobs it runs now. Only a running job has a worker_id, and
-- saying so lets the count read the partial index of running jobs (jobs_lease_idx)
-- instead of the whole table: a million finished jobs cost nothing here.
SELECT w.*,
       (SELECT count(*) FROM {schema}.jobs j
        WHERE j.status = 'running' AND j.worker_id = w.id) AS running
FROM {schema}.workers w
ORDER BY w.started_at
