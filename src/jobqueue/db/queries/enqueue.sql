-- $6 is an absolute run_at, $7 a delay in seconds; the delay is added to the
-- database's clock so that hosts with skewed clocks agree.
-- $8 is "now": NULL for the database's clock, a time for a test's (db/store.py).
-- $9 is the enqueuer's trace context (JSON), or NULL.
-- $10 is the job's concurrency key (migration 0020), or NULL.
-- $11, $12: its tags and metadata (migration 0030), or NULL for none.
-- A job with tags or metadata gets its row in job_labels in the same statement
-- (migration 0031 says why not by a trigger).
-- It returns only what the database chose; the rest of the job is the caller's row
-- (JobRow.stored): reading all 35 columns back cost a single enqueue about 4%.
WITH job AS (
    INSERT INTO {schema}.jobs (type, queue, payload, priority, max_attempts, run_at, trace_context,
                               concurrency_key, tags, meta)
    VALUES ($1, $2, $3, $4, $5, COALESCE($6, COALESCE($8::timestamptz, now()) + make_interval(secs => COALESCE($7::float8, 0))),
            $9::jsonb, $10::text, $11::text[], $12::jsonb)
    RETURNING id, run_at, created_at, tags, meta
), labels AS (  -- the search's copy (migration 0031)
    INSERT INTO {schema}.job_labels (job_id, tags, meta)
    SELECT id, tags, meta FROM job WHERE tags IS NOT NULL OR meta IS NOT NULL
)
SELECT id, run_at, created_at FROM job
