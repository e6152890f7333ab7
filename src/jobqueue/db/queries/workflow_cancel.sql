-- Cancels every job of workflow $1 not ended yet, as cancel_jobs.sql does one job: a
-- blocked, pending or waiting job at once, a running one asked to stop (its worker
-- ends it cancelled). Rows are locked in id order, as every multi-row write of the jobs does.
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH picked AS (
    SELECT id
    FROM {schema}.jobs
    WHERE workflow_id = $1
      AND status IN ('blocked', 'pending', 'running', 'waiting')
      AND (status <> 'running' OR cancel_requested_at IS NULL)
    ORDER BY id
    FOR UPDATE
), cancelled AS (
    UPDATE {schema}.jobs AS j
    SET status = CASE WHEN j.status = 'running' THEN j.status ELSE 'cancelled' END,
        finished_at = CASE WHEN j.status <> 'running' THEN COALESCE($2::timestamptz, now()) END,
        cancel_requested_at = COALESCE($2::timestamptz, now()),
        updated_at = COALESCE($2::timestamptz, now())
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.status
)
SELECT id, status,
       CASE WHEN status = 'running' THEN pg_notify({cancel_channel}, id::text)
            ELSE pg_notify({done_channel}, id::text) END AS notified
FROM cancelled
