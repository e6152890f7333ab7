-- Every declared job type, by name.
SELECT name, payload_schema, created_at, updated_at
FROM {schema}.job_types
ORDER BY name
