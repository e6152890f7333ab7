-- Makes a job just stored under a unique key ($1, by enqueue_unique.sql, in the same
-- transaction) a node of workflow $2: its ref $3, state $4, parents $5, policies $6, $7.
UPDATE {schema}.jobs
SET workflow_id = $2, workflow_ref = $3, status = $4, parents_left = $5, parents_failed = 0,
    on_failure = $6, run_if = $7
WHERE id = $1
