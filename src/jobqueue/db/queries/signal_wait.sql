-- ctx.wait_for_signal (docs/durable.md#signals), after signal_hold.sql locked the job
-- in this transaction: the run's $3th wait for the name $2 takes that name's $3th
-- signal to the job $1, among those sent by its time limit $4 (NULL: none). When there
-- is none and the time limit has not passed, the job becomes 'waiting' (holding no
-- slot and no lease, its attempt not counted, as sleep.sql), until a signal comes
-- (signal_send.sql) or, with a time limit, until it (wake.sql); a cancel asked for
-- meanwhile cancels it instead. $5 is "now". Returns found, the payload, and the job's
-- status if it was changed.
WITH found AS (
    SELECT s.payload
    FROM {schema}.job_signals AS s
    WHERE s.job_id = $1 AND s.name = $2
      AND ($4::timestamptz IS NULL OR s.sent_at <= $4::timestamptz)
    ORDER BY s.id
    OFFSET $3 - 1
    LIMIT 1
), waited AS (
    UPDATE {schema}.jobs AS j
    SET (status, awaiting, run_at, attempts, last_error, finished_at) = (
            SELECT CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
                        ELSE 'waiting' END,
                   CASE WHEN $4::timestamptz IS NULL THEN 'signal' END,
                   COALESCE($4::timestamptz, j.run_at),
                   CASE WHEN j.cancel_requested_at IS NOT NULL THEN j.attempts
                        ELSE j.attempts - 1 END,
                   CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled while running'
                        ELSE j.last_error END,
                   CASE WHEN j.cancel_requested_at IS NOT NULL
                        THEN COALESCE($5::timestamptz, now()) END
        ),
        worker_id = NULL,
        lease_expires_at = NULL,
        updated_at = COALESCE($5::timestamptz, now())
    WHERE j.id = $1
      AND NOT EXISTS (SELECT 1 FROM found)
      AND ($4::timestamptz IS NULL OR $4::timestamptz > COALESCE($5::timestamptz, now()))
    RETURNING j.status
), told AS (
    SELECT pg_notify({done_channel}, $1::text) FROM waited WHERE status = 'cancelled'
)
SELECT EXISTS (SELECT 1 FROM found) AS found,
       (SELECT payload::text FROM found) AS payload,
       (SELECT status FROM waited) AS status
WHERE (SELECT count(*) FROM told) >= 0
