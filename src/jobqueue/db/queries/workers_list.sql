-- Every worker with the jobs it runs now. A finished job keeps the worker of its last
-- attempt, so the count asks for running jobs, which also lets it read the partial
-- index of running jobs (jobs_lease_idx) instead of the whole table: a million
-- finished jobs cost nothing here.
SELECT w.*,
       (SELECT count(*) FROM {schema}.jobs j
        WHERE j.status = 'running' AND j.worker_id = w.id) AS running
FROM {schema}.workers w
ORDER BY w.started_at
