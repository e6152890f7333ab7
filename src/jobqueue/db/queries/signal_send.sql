-- A signal to a job (POST /signals, jq.signal; docs/durable.md#signals): kept in
-- job_signals whether or not the job waits for it yet, for a job that has not ended.
-- A job waiting for a signal or a time (awaiting 'signal', or NULL: a signal's time
-- limit, a sleep) is made pending and due at once, and its queue's workers woken; its
-- next run finds the signal, or waits again. The job's row is updated whatever its
-- state, so that this statement and a handler's wait (signal_hold.sql, then
-- signal_wait.sql) are ordered by its lock: whichever commits second sees the other.
-- $1: the job; $2: the signal's name; $3: its payload as JSON text; $4 is "now".
-- Returns the signal's id (NULL: not kept) and the job's status (NULL: no such job).
WITH target AS (
    UPDATE {schema}.jobs AS j
    SET status = CASE WHEN j.status = 'waiting' AND j.awaiting IS DISTINCT FROM 'children'
                      THEN 'pending' ELSE j.status END,
        run_at = CASE WHEN j.status = 'waiting' AND j.awaiting IS DISTINCT FROM 'children'
                      THEN COALESCE($4::timestamptz, now()) ELSE j.run_at END,
        awaiting = CASE WHEN j.status = 'waiting' AND j.awaiting IS DISTINCT FROM 'children'
                        THEN NULL ELSE j.awaiting END,
        updated_at = COALESCE($4::timestamptz, now())
    WHERE j.id = $1 AND j.status NOT IN ('completed', 'failed', 'cancelled')
    RETURNING j.id, j.queue, j.status
), kept AS (
    INSERT INTO {schema}.job_signals (job_id, name, payload, sent_at)
    SELECT id, $2, $3::jsonb, COALESCE($4::timestamptz, now()) FROM target
    RETURNING id
), told AS (
    SELECT pg_notify({channel}, '* ' || queue) FROM target WHERE status = 'pending'
)
SELECT (SELECT id FROM kept) AS signal_id,
       COALESCE((SELECT status FROM target),
                (SELECT status FROM {schema}.jobs WHERE id = $1)) AS status
WHERE (SELECT count(*) FROM told) >= 0
