-- What GET /jobs/{id} shows of a durable job besides its steps (docs/durable.md): what it
-- waits for (awaiting, migration 0035), the job that spawned it, and whether it has
-- spawned children (children_left is NULL for a job that has none).
SELECT awaiting, spawned_by, children_left
FROM {schema}.jobs
WHERE id = $1
