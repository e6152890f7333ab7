-- What GET /jobs/{id} shows of a durable job besides its row (docs/durable.md), in one
-- round trip: what it waits for (awaiting, migration 0035), the job that spawned it,
-- whether it has spawned children (children_left is NULL for a job that has none), and
-- one row per step its handler recorded, in the order they were recorded (one row with
-- a NULL name for a job with no steps; none for no such job). $1: the job.
SELECT j.awaiting, j.spawned_by, j.children_left,
       s.name, s.attempt, s.result, s.worker_id, s.recorded_at
FROM {schema}.jobs j
LEFT JOIN {schema}.job_steps s ON s.job_id = j.id
WHERE j.id = $1
ORDER BY s.recorded_at, s.name
