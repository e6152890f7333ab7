-- Creates a schedule made over HTTP, Python or the CLI; no row when its name is taken.
INSERT INTO {schema}.schedules (name, type, cron, every_seconds, timezone, payload, queue,
                                priority, missed, enabled, next_run_at)
VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11)
ON CONFLICT (name) DO NOTHING
RETURNING *, NULL::text AS last_job_status
