-- Enqueues a job under a unique key ($8) in a conflict mode (migration 0029): with $13
-- false ("replace") a pending holder takes this job's payload, priority and run time;
-- true ("debounce"), its payload and a run time of now + $7. A running holder is left
-- alone and this job is stored behind it. Returns the job and whether it is new.
-- $1..$12 as in enqueue_unique.sql; $14, $15: its tags and metadata (migration 0030):
-- a holder changed takes those given, and keeps its own where NULL.
-- A new job with tags or metadata gets its row in job_labels in the same statement
-- (migration 0031 says why not by a trigger); a changed holder's is kept by a trigger.
WITH job AS (
    SELECT r.created, (r.job).*
    FROM {schema}.enqueue_unique_replacing($1, $2, $3::jsonb, $4, $5, $6, $7::float8, $8, $9,
                                           $10::timestamptz, $11::jsonb, $12::text, $13,
                                           $14::text[], $15::jsonb) AS r
), labels AS (  -- the search's copy (migration 0031)
    INSERT INTO {schema}.job_labels (job_id, tags, meta)
    SELECT id, tags, meta FROM job WHERE created AND (tags IS NOT NULL OR meta IS NOT NULL)
)
SELECT * FROM job
