-- Durable sleeps (ctx.sleep, docs/durable.md#durable-sleep): each job is 'waiting'
-- until its time, holding no worker's slot and no lease, and its attempt is not counted
-- (attempts goes back by one: a sleep is no failure). The leader makes it pending
-- again at that time (wake.sql), and its next run replays its steps. A job asked to
-- stop meanwhile ends cancelled, announced on the done channel. Fenced like
-- complete.sql.
-- $1: the job ids; $2: {"<id>": {"claim": token, "until": ISO time}, ...}; $3: the
-- worker; $4 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH slept AS (
    UPDATE {schema}.jobs AS j
    SET (status, run_at, attempts, last_error, finished_at) = (
            SELECT CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
                        ELSE 'waiting' END,
                   CASE WHEN j.cancel_requested_at IS NOT NULL THEN j.run_at
                        ELSE s.until END,
                   CASE WHEN j.cancel_requested_at IS NOT NULL THEN j.attempts
                        ELSE j.attempts - 1 END,
                   CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled while running'
                        ELSE j.last_error END,
                   CASE WHEN j.cancel_requested_at IS NOT NULL
                        THEN COALESCE($4::timestamptz, now()) END
            FROM jsonb_to_record($2::jsonb -> j.id::text) AS s(until timestamptz)
        ),
        worker_id = NULL,
        lease_expires_at = NULL,
        updated_at = COALESCE($4::timestamptz, now())
    WHERE j.id = ANY($1::bigint[])
      AND j.lease_expires_at IS NOT NULL
      AND j.worker_id = $3
      AND j.claim_token = ($2::jsonb -> j.id::text ->> 'claim')::bigint
    RETURNING j.id, j.status
), told AS (  -- the jobs that ended, on the done channel as in complete.sql
    SELECT pg_notify({done_channel}, string_agg(id::text, ','))
    FROM slept WHERE status = 'cancelled' GROUP BY id / 300
)
SELECT id FROM slept WHERE (SELECT count(*) FROM told) >= 0
