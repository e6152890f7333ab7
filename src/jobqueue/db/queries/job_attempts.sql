-- The attempt history of one job, oldest first.
SELECT attempt, worker_id, error, traceback, started_at, finished_at,
       extract(epoch FROM finished_at - started_at)::float8 AS seconds
FROM {schema}.job_attempts
WHERE job_id = $1
ORDER BY id
