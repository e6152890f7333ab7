-- A due schedule's ticks enqueued: its next tick, and the last tick and job enqueued
-- (NULL keeps them: every missed tick was skipped).
UPDATE {schema}.schedules
SET next_run_at = $2, last_run_at = COALESCE($3, last_run_at),
    last_job_id = COALESCE($4, last_job_id)
WHERE name = $1
