-- jobqueue:no-transaction
-- The waiting jobs (migration 0033) by the time they wake: what the leader's wake.sql
-- reads every second, and what GET /queues counts by queue (an index-only scan: the
-- queue is in the index). Built CONCURRENTLY, so enqueues and claims go on meanwhile;
-- every statement here is safe to run again (docs/migrations.md).
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_waiting_idx ON {schema}.jobs (run_at)
    INCLUDE (queue) WHERE status = 'waiting';

-- Reads the jobs under a lock that lets writes go on.
ALTER TABLE {schema}.jobs VALIDATE CONSTRAINT jobs_status_check;
