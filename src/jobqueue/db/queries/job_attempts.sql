-- The attempt history of one job, oldest first: every failed attempt, every other
-- attempt (completed, running, cancelled) that logged, each with its log (job_logs,
-- matched on the attempt's number and claim time), and the job's last attempt when it
-- did neither, from the job's row: its worker stays there (complete.sql). An attempt
-- not failed has no error; its end is the job's, once the job has left running.
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
UNION ALL
SELECT j.attempts, j.worker_id, NULL, NULL, j.started_at, e.ended,
       extract(epoch FROM e.ended - j.started_at)::float8, NULL, false
FROM {schema}.jobs AS j,
     LATERAL (SELECT CASE WHEN j.status <> 'running' THEN j.finished_at END AS ended) AS e
WHERE j.id = $1
  AND j.worker_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM {schema}.job_attempts AS a
                  WHERE a.job_id = j.id AND a.attempt = j.attempts
                    AND a.started_at = j.started_at)
  AND NOT EXISTS (SELECT 1 FROM {schema}.job_logs AS l
                  WHERE l.job_id = j.id AND l.attempt = j.attempts
                    AND l.started_at = j.started_at)
ORDER BY started_at NULLS FIRST, attempt
