-- Enqueues a job under a unique key ($8), unless another job holds the key: then no
-- row comes back (the caller reads the holder with unique_holder.sql). $1..$7 as in
-- enqueue.sql; $9: seconds the key stays held after the job completed (NULL: none).
--
-- The job's id is drawn first so that the key row can name it; a key that is taken
-- wastes that id, nothing else. Concurrent enqueues with one key queue on its row,
-- and each re-reads held_until after the one before it committed.
-- $10 is "now": NULL for the database's clock, a time for a test's (db/store.py).
-- $11 is the enqueuer's trace context (JSON), or NULL.
WITH new_job AS (
    SELECT nextval(pg_get_serial_sequence('{schema}.jobs', 'id')) AS id
), key AS (
    INSERT INTO {schema}.unique_keys AS k (key, job_id, hold_seconds)
    SELECT $8, id, $9 FROM new_job
    ON CONFLICT (key) DO UPDATE
        SET job_id = excluded.job_id, hold_seconds = excluded.hold_seconds,
            held_until = 'infinity'
        WHERE k.held_until <= COALESCE($10::timestamptz, now())
    RETURNING job_id
)
INSERT INTO {schema}.jobs
    (id, type, queue, payload, priority, max_attempts, run_at, unique_key, trace_context)
OVERRIDING SYSTEM VALUE
SELECT key.job_id, $1, $2, $3::jsonb, $4, $5,
       COALESCE($6, COALESCE($10::timestamptz, now()) + make_interval(secs => COALESCE($7::float8, 0))), $8,
       $11::jsonb
FROM key
RETURNING *
