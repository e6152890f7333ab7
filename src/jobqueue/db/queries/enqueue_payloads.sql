-- Inserts a batch of jobs that differ only in payload (enqueue_many): the options are
-- bound once and only the payloads travel as an array, which costs a third of the time
-- of one array per column. Rows go in array order, so the ids come back in that order.
-- $8 is "now": NULL for the database's clock, a time for a test's (db/store.py).
-- $9 is the enqueuer's trace context (JSON), the same for every job, or NULL.
-- $10: each job's concurrency key (migration 0020), or NULL for none.
-- $11, $12: the tags and metadata of every job (migration 0030), or NULL.
-- A job with tags or metadata gets its row in job_labels in the same statement
-- (migration 0031 says why not by a trigger).
WITH job AS (
    INSERT INTO {schema}.jobs (type, queue, payload, priority, max_attempts, run_at, trace_context,
                               concurrency_key, tags, meta)
    SELECT $1, $2, n.payload::jsonb, $4, $5,
           COALESCE($6, COALESCE($8::timestamptz, now()) + make_interval(secs => COALESCE($7::float8, 0))),
           $9::jsonb, n.key, $11::text[], $12::jsonb
    FROM unnest($3::text[], $10::text[]) WITH ORDINALITY AS n(payload, key, ord)
    ORDER BY n.ord
    RETURNING id, tags, meta
), labels AS (  -- the search's copy (migration 0031)
    INSERT INTO {schema}.job_labels (job_id, tags, meta)
    SELECT id, tags, meta FROM job WHERE tags IS NOT NULL OR meta IS NOT NULL
)
SELECT id FROM job
