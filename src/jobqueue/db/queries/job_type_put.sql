-- Declares a job type, or replaces its payload schema; returns it, and whether it is
-- new (xmax is 0 for a row this statement inserted).
INSERT INTO {schema}.job_types AS t (name, payload_schema)
VALUES ($1, $2::jsonb)
ON CONFLICT (name) DO UPDATE
SET payload_schema = EXCLUDED.payload_schema, updated_at = now()
RETURNING t.name, t.payload_schema, t.created_at, t.updated_at, (t.xmax = 0) AS created
