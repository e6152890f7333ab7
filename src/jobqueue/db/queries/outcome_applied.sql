-- A job as a refused outcome asks after it (http_workers/service.py): was it this very
-- claim's outcome, applied before and sent again (an answer lost on the way), rather
-- than a stale lease's? Read only when a fenced write was refused, never on the way of
-- one that is applied. $1: the job id.
-- claim_token: a claim's token stays on the job after its outcome (until the next
-- claim draws another). attempt_worker, attempt_error: the attempt row of the job's
-- last attempt (written by a failure, and by a rescue as 'worker lost'), if any.
-- retry_in: seconds until a pending job is due again.
SELECT j.status, j.claim_token, j.last_error,
       GREATEST(EXTRACT(EPOCH FROM j.run_at - now()), 0)::float8 AS retry_in,
       a.worker_id AS attempt_worker, a.error AS attempt_error
FROM {schema}.jobs AS j
LEFT JOIN LATERAL (
    SELECT worker_id, error
    FROM {schema}.job_attempts
    WHERE job_id = j.id AND attempt = j.attempts
    ORDER BY id DESC
    LIMIT 1
) AS a ON true
WHERE j.id = $1
