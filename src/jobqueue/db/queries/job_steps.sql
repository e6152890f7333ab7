-- The steps a job's handler recorded (ctx.step, docs/durable.md), in the order they
-- were recorded: what a replay returns instead of running them, and what GET
-- /jobs/{id} lists. $1: the job.
SELECT name, attempt, result, worker_id, recorded_at
FROM {schema}.job_steps
WHERE job_id = $1
ORDER BY recorded_at, name
