-- Whether limited queue $1 has a due job, one probe of the claim index: a producer
-- asks before it takes the queue's lock (limit_lock.sql), so that a limited queue
-- with nothing to start costs what an unlimited one does, one statement. A job queued
-- just after the probe says so by NOTIFY, and the producer looks again.
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
SELECT EXISTS (
    SELECT 1 FROM {schema}.jobs
    WHERE status = 'pending' AND queue = $1 AND run_at <= COALESCE($2::timestamptz, now())
    ORDER BY priority, run_at, id
    LIMIT 1
)
