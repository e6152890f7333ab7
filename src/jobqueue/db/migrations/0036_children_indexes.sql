-- jobqueue:no-transaction
-- The indexes of migration 0035's columns, built CONCURRENTLY so that enqueues and
-- claims go on meanwhile; every statement here is safe to run again
-- (docs/migrations.md).
--
-- A parent's children (ctx.wait_for counts them, a cancelled parent cancels them):
-- only spawned jobs are in it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_spawned_by_idx ON {schema}.jobs (spawned_by)
    WHERE spawned_by IS NOT NULL;

-- The waiting jobs that wake at a time (a sleep, a signal's time limit), by that time:
-- what the leader's wake.sql and leader_due.sql read. Jobs waiting for their children
-- or for a signal with no time limit are not in it, so that they cost the leader
-- nothing however long they wait.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_wake_idx ON {schema}.jobs (run_at)
    INCLUDE (queue) WHERE status = 'waiting' AND awaiting IS NULL;
