-- Creates a schedule made over HTTP, Python or the CLI; no row when its name is taken.
-- $12, $13: its jobs' tags and metadata (migration 0030), or NULL.
INSERT INTO {schema}.schedules (name, type, cron, every_seconds, timezone, payload, queue,
                                priority, missed, enabled, next_run_at, tags, meta)
VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $12::text[], $13::jsonb)
ON CONFLICT (name) DO NOTHING
RETURNING *, NULL::text AS last_job_status
