-- Inserts jobs of any types and options in one statement: the calls an Enqueuer
-- merged, or enqueue_jobs (POST /jobs/batch). The jobs trigger sends one NOTIFY per queue.
-- One array per column, one element per job; each job's id, run_at and created_at come
-- back in the order given (the rest of its row is the caller's: JobRow.stored).
-- $8 is "now": NULL for the database's clock, a time for a test's (db/store.py).
-- $9: each job's trace context (JSON), or NULL.
-- $10: each job's concurrency key (migration 0020), or NULL.
-- $12: each job's metadata (migration 0030), or NULL. $11: every job's tags, one job's
-- after another; $13, $14: where each job's begin and end among them, or NULL for none
-- (arrays of arrays must be rectangular in PostgreSQL). NULL arrays when no job has any.
-- A job with tags or metadata gets its row in job_labels in the same statement
-- (migration 0031 says why not by a trigger).
WITH job AS (
    INSERT INTO {schema}.jobs (type, queue, payload, priority, max_attempts, run_at, trace_context,
                               concurrency_key, tags, meta)
    SELECT n.type, n.queue, n.payload::jsonb, n.priority, n.max_attempts,
           COALESCE(n.run_at, COALESCE($8::timestamptz, now()) + make_interval(secs => COALESCE(n.delay, 0))),
           n.trace::jsonb, n.key,
           ($11::text[])[n.tags_from:n.tags_to],
           n.meta::jsonb
    FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::integer[],
                $6::timestamptz[], $7::float8[], $9::text[], $10::text[], $12::text[],
                $13::integer[], $14::integer[])
         WITH ORDINALITY AS n(type, queue, payload, priority, max_attempts, run_at, delay, trace, key,
                              meta, tags_from, tags_to, ord)
    ORDER BY n.ord
    RETURNING id, run_at, created_at, tags, meta
), labels AS (  -- the search's copy (migration 0031)
    INSERT INTO {schema}.job_labels (job_id, tags, meta)
    SELECT id, tags, meta FROM job WHERE tags IS NOT NULL OR meta IS NOT NULL
)
SELECT id, run_at, created_at FROM job
