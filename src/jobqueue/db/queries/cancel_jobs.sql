-- Cancels one job ($1) or every one matching the filters ($2 type, $3 queue; NULL:
-- any), at most $4 per call (the caller repeats until a batch comes back short).
-- A pending (or blocked: a workflow's; or waiting: asleep) job is cancelled at once. A
-- running job is asked to stop: its worker learns of it by NOTIFY on the cancel channel
-- (payload: the job id), or at its next heartbeat if it missed that, and ends the job
-- cancelled. A running job already asked is not picked again, so that the caller's
-- loop ends.
-- $5 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH picked AS (
    SELECT id
    FROM {schema}.jobs
    WHERE status IN ('blocked', 'pending', 'running', 'waiting')
      AND (status <> 'running' OR cancel_requested_at IS NULL)
      AND ($1::bigint IS NULL OR id = $1)
      AND ($2::text IS NULL OR type = $2)
      AND ($3::text IS NULL OR queue = $3)
    ORDER BY id
    LIMIT $4
    FOR UPDATE SKIP LOCKED
), cancelled AS (
    UPDATE {schema}.jobs AS j
    SET status = CASE WHEN j.status <> 'running' THEN 'cancelled' ELSE j.status END,
        finished_at = CASE WHEN j.status <> 'running' THEN COALESCE($5::timestamptz, now()) END,
        cancel_requested_at = COALESCE($5::timestamptz, now()),
        updated_at = COALESCE($5::timestamptz, now())
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.status
)
SELECT id, status,
       CASE WHEN status = 'running' THEN pg_notify({cancel_channel}, id::text)
            ELSE pg_notify({done_channel}, id::text) END AS notified
FROM cancelled
