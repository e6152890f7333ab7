-- Enqueues a job under a unique key ($8), unless another job holds the key: then no
-- row comes back (the caller reads the holder with unique_holder.sql). $1..$7 as in
-- enqueue.sql; $9: seconds the key stays held after the job completed (NULL: none).
--
-- The statement is the function's (migration 0016), run as the schema's owner so that
-- an enqueue-only role needs no privilege on unique_keys. The job's id is drawn first
-- so that the key row can name it; a key that is taken wastes that id, nothing else.
-- Concurrent enqueues with one key queue on its row, and each re-reads held_until
-- after the one before it committed.
-- $10 is "now": NULL for the database's clock, a time for a test's (db/store.py).
-- $11 is the enqueuer's trace context (JSON), or NULL.
-- $12 is the job's concurrency key (migrations 0020, 0021), or NULL.
-- $13, $14: its tags and metadata (migration 0030), or NULL.
-- A job with tags or metadata gets its row in job_labels in the same statement
-- (migration 0031 says why not by a trigger).
WITH job AS (
    SELECT *
    FROM {schema}.enqueue_unique($1, $2, $3::jsonb, $4, $5, $6, $7::float8, $8, $9,
                                 $10::timestamptz, $11::jsonb, $12::text, $13::text[], $14::jsonb)
), labels AS (  -- the search's copy (migration 0031)
    INSERT INTO {schema}.job_labels (job_id, tags, meta)
    SELECT id, tags, meta FROM job WHERE tags IS NOT NULL OR meta IS NOT NULL
)
SELECT * FROM job
