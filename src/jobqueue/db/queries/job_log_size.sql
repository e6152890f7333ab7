-- The log the running attempt of job $1 has kept so far: its size in bytes, and
-- whether it was cut at JOBQUEUE_JOB_LOG_BYTES. What an HTTP worker's next lines may
-- add (http_workers/service.py); no row while the attempt has logged nothing.
SELECT octet_length(l.log) AS size, l.truncated
FROM {schema}.jobs AS j
JOIN {schema}.job_logs AS l
  ON l.job_id = j.id AND l.attempt = j.attempts AND l.started_at = j.started_at
WHERE j.id = $1
