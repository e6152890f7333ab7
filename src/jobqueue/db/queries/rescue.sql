-- Returns jobs whose lease ran out (their worker died or froze) to the queue: pending
-- again while attempts are left, the lost attempt counted (and recorded in the
-- attempt history), else failed; cancelled if it had been asked to stop. Clearing worker_id fences the lost worker out: its
-- late writes change nothing.
-- The NOTIFY says "* <queue>": the workers look for its jobs from the start (migration 0011).
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH expired AS (
    SELECT id, worker_id
    FROM {schema}.jobs
    WHERE status = 'running' AND lease_expires_at < COALESCE($2::timestamptz, now())
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), rescued AS (
    UPDATE {schema}.jobs AS j
    SET status = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
                      WHEN j.attempts >= j.max_attempts THEN 'failed' ELSE 'pending' END,
        last_error = 'worker lost (lease expired)',
        run_at = COALESCE($2::timestamptz, now()),
        worker_id = NULL,
        lease_expires_at = NULL,
        finished_at = CASE WHEN j.attempts >= j.max_attempts
                             OR j.cancel_requested_at IS NOT NULL THEN COALESCE($2::timestamptz, now()) END,
        updated_at = COALESCE($2::timestamptz, now())
    WHERE j.id = ANY(ARRAY(SELECT id FROM expired))
    RETURNING j.id, j.status, j.attempts, j.max_attempts, j.queue, j.type, j.started_at, j.last_error
), recorded AS (
    INSERT INTO {schema}.job_attempts (job_id, attempt, worker_id, error, started_at)
    SELECT r.id, r.attempts, e.worker_id, r.last_error, r.started_at
    FROM rescued AS r JOIN expired AS e USING (id)
)
SELECT id, status, attempts, max_attempts, queue, type, pg_notify({channel}, '* ' || queue) AS notified,
       CASE WHEN status <> 'pending' THEN pg_notify({done_channel}, id::text) END AS ended
FROM rescued
