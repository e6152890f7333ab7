-- Writes back a schedule read under schedule_lock.sql, as changed (PATCH, pause, resume).
UPDATE {schema}.schedules s
SET type = $2, cron = $3, every_seconds = $4, timezone = $5, payload = $6::jsonb, queue = $7,
    priority = $8, missed = $9, enabled = $10, next_run_at = $11, tags = $12::text[],
    meta = $13::jsonb, updated_at = now()
WHERE s.name = $1
RETURNING s.*, (SELECT j.status FROM {schema}.jobs j WHERE j.id = s.last_job_id) AS last_job_status
