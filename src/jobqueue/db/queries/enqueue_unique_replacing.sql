-- Enqueues a job under a unique key ($8) in a conflict mode (migration 0029): with $13
-- false ("replace") a pending holder takes this job's payload, priority and run time;
-- true ("debounce"), its payload and a run time of now + $7. A running holder is left
-- alone and this job is stored behind it. Returns the job and whether it is new.
-- $1..$12 as in enqueue_unique.sql; $14, $15: its tags and metadata (migration 0030):
-- a holder changed takes those given, and keeps its own where NULL.
SELECT r.created, (r.job).*
FROM {schema}.enqueue_unique_replacing($1, $2, $3::jsonb, $4, $5, $6, $7::float8, $8, $9,
                                       $10::timestamptz, $11::jsonb, $12::text, $13,
                                       $14::text[], $15::jsonb) AS r
