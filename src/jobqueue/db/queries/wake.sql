-- Wakes the waiting jobs whose time has come (ctx.sleep, a signal's time limit;
-- migrations 0033 and 0035): pending again and due at once, at most $1 of them, the
-- earliest first, read from their partial index (jobs_wake_idx, migration 0036), which
-- leaves out jobs waiting for children or for a signal with no time limit. The NOTIFY wakes the workers of their queues ("*
-- <queue>": they look from the start of the queue, as after a manual retry). Run by
-- the maintenance leader every second; SKIP LOCKED lets a leader that overlaps another
-- for a moment wake other jobs. Returns how many it woke.
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH woken AS (
    UPDATE {schema}.jobs AS j
    SET status = 'pending',
        updated_at = COALESCE($2::timestamptz, now())
    WHERE j.id = ANY(ARRAY(
        SELECT id
        FROM {schema}.jobs
        WHERE status = 'waiting' AND awaiting IS NULL
          AND run_at <= COALESCE($2::timestamptz, now())
        ORDER BY run_at
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    ))
    RETURNING j.queue
), told AS (
    SELECT pg_notify({channel}, '* ' || queue) FROM woken GROUP BY queue
)
SELECT count(*) FROM woken WHERE (SELECT count(*) FROM told) >= 0
