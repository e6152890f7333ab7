-- Forgets a declared job type; returns it, or nothing when none has the name. Its jobs
-- stay as they are: a type is checked when a job is enqueued, not when it runs.
DELETE FROM {schema}.job_types
WHERE name = $1
RETURNING name, payload_schema, created_at, updated_at
