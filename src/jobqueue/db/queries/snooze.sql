-- Snoozed attempts (raise Snooze(seconds), or a worker over HTTP's snooze): each job is
-- due again after its delay, and the attempt is not counted for its retry policy
-- (attempts goes back by one). Each snooze is a row of the job's attempt history,
-- "snoozed for <seconds>s", and those rows are what count the snoozes: a job snoozed $5
-- times already fails instead, saying so (no column of its own: the jobs' rows, which
-- every claim and completion rewrites, stay as narrow as they were). A job asked to
-- stop meanwhile ends cancelled. Fenced like complete.sql.
-- $1: the job ids; $2: {"<id>": {"claim": token, "delay": seconds}, ...}; $3: the
-- worker; $4 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH counted AS (
    SELECT j.id, count(a.id) AS snoozes
    FROM {schema}.jobs AS j
    LEFT JOIN {schema}.job_attempts AS a ON a.job_id = j.id AND a.error LIKE 'snoozed for %'
    WHERE j.id = ANY($1::bigint[])
    GROUP BY j.id
), snoozed AS (
    UPDATE {schema}.jobs AS j
    SET (status, run_at, attempts, last_error, finished_at) = (
            SELECT CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
                        WHEN c.snoozes >= $5 THEN 'failed' ELSE 'pending' END,
                   CASE WHEN j.cancel_requested_at IS NULL AND c.snoozes < $5
                        THEN COALESCE($4::timestamptz, now()) + make_interval(secs => f.delay)
                        ELSE j.run_at END,
                   CASE WHEN j.cancel_requested_at IS NULL AND c.snoozes < $5
                        THEN j.attempts - 1 ELSE j.attempts END,
                   CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled while running'
                        WHEN c.snoozes >= $5
                        THEN format('snoozed %s times (JOBQUEUE_MAX_SNOOZES): it never became ready', c.snoozes)
                        ELSE j.last_error END,
                   CASE WHEN j.cancel_requested_at IS NOT NULL OR c.snoozes >= $5
                        THEN COALESCE($4::timestamptz, now()) END
            FROM jsonb_to_record($2::jsonb -> j.id::text) AS f(delay float8)
        ),
        worker_id = NULL,
        lease_expires_at = NULL,
        updated_at = COALESCE($4::timestamptz, now())
    FROM counted AS c
    WHERE j.id = c.id
      AND j.lease_expires_at IS NOT NULL
      AND j.worker_id = $3
      AND j.claim_token = ($2::jsonb -> j.id::text ->> 'claim')::bigint
    RETURNING j.id, j.status, j.attempts, j.started_at, j.last_error,
              ($2::jsonb -> j.id::text ->> 'delay')::float8 AS delay
), told AS (  -- the jobs that ended, on the done channel as in complete.sql
    SELECT pg_notify({done_channel}, string_agg(id::text, ','))
    FROM snoozed WHERE status <> 'pending' GROUP BY id / 300
)
INSERT INTO {schema}.job_attempts (job_id, attempt, worker_id, error, started_at)
SELECT s.id,
       CASE WHEN s.status = 'pending' THEN s.attempts + 1 ELSE s.attempts END,
       $3,
       CASE WHEN s.status = 'pending' THEN format('snoozed for %ss', round(s.delay::numeric, 3))
            ELSE s.last_error END,
       s.started_at
FROM snoozed AS s
WHERE (SELECT count(*) FROM told) >= 0
RETURNING job_id AS id, error
