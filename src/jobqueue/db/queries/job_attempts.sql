-- The attempt history of one job, oldest first: every failed attempt, and every
-- other attempt (completed, running, cancelled) that logged, each with its log
-- (job_logs, matched on the attempt's number and claim time). An attempt not failed
-- has no error; its end is the job's, once the job has left running.
SELECT a.attempt, a.worker_id, a.error, a.traceback, a.started_at, a.finished_at,
       extract(epoch FROM a.finished_at - a.started_at)::float8 AS seconds,
       l.log, COALESCE(l.truncated, false) AS log_truncated
FROM {schema}.job_attempts AS a
LEFT JOIN {schema}.job_logs AS l
       ON l.job_id = a.job_id AND l.attempt = a.attempt AND l.started_at = a.started_at
WHERE a.job_id = $1
UNION ALL
SELECT l.attempt, l.worker_id, NULL, NULL, l.started_at, j.finished_at,
       extract(epoch FROM j.finished_at - l.started_at)::float8,
       l.log, l.truncated
FROM {schema}.job_logs AS l
LEFT JOIN {schema}.jobs AS j
       ON j.id = l.job_id AND j.attempts = l.attempt AND j.started_at = l.started_at
      AND j.status <> 'running'
WHERE l.job_id = $1
  AND NOT EXISTS (SELECT 1 FROM {schema}.job_attempts AS a
                  WHERE a.job_id = l.job_id AND a.attempt = l.attempt
                    AND a.started_at = l.started_at)
ORDER BY started_at NULLS FIRST, attempt
