-- Limits shared by every worker (docs/limits.md): at most global_limit of a queue's
-- jobs running at once, at most key_limit per concurrency key, at most rate_count
-- starts in any rate_period (queue-wide) and key_rate_count in any key_rate_period
-- (per key). They live on the queue's row, which a claim of a limited queue locks
-- (limit_lock.sql) before it counts: the counting statement then sees every claim
-- that held the lock before it. NULL: no such limit.
ALTER TABLE {schema}.queues
    ADD COLUMN global_limit integer CHECK (global_limit > 0),
    ADD COLUMN key_limit integer CHECK (key_limit > 0),
    ADD COLUMN rate_count integer CHECK (rate_count > 0),
    ADD COLUMN rate_period interval CHECK (rate_period > interval '0'),
    ADD COLUMN key_rate_count integer CHECK (key_rate_count > 0),
    ADD COLUMN key_rate_period interval CHECK (key_rate_period > interval '0'),
    -- The key the last claim served: the next one serves the keys after it first.
    ADD COLUMN key_cursor text,
    ADD CONSTRAINT queues_rate_whole CHECK ((rate_count IS NULL) = (rate_period IS NULL)),
    ADD CONSTRAINT queues_key_rate_whole
        CHECK ((key_rate_count IS NULL) = (key_rate_period IS NULL));

-- A job's concurrency key (a tenant, an account): NULL for most jobs. Adding a NULL
-- column rewrites nothing.
ALTER TABLE {schema}.jobs ADD COLUMN concurrency_key text CHECK (concurrency_key <> '');

-- Both indexes hold keyed jobs only, so a job without a key costs no entry in them.
-- The pending one lets a claim step from one key to the next without reading the
-- jobs in between; the running one counts a key's running jobs.
CREATE INDEX jobs_key_claim_idx ON {schema}.jobs (queue, concurrency_key, priority, run_at, id)
    WHERE status = 'pending' AND concurrency_key IS NOT NULL;
CREATE INDEX jobs_key_running_idx ON {schema}.jobs (queue, concurrency_key)
    WHERE status = 'running' AND concurrency_key IS NOT NULL;

-- The starts of rate-limited queues, one row per job started (key: its concurrency
-- key), kept for the longest of the queue's periods: a claim counts those inside
-- the period that ends now, so no window of that length ever holds more.
CREATE TABLE {schema}.queue_starts (
    queue text        NOT NULL,
    key   text,
    at    timestamptz NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
CREATE INDEX queue_starts_at_idx ON {schema}.queue_starts (queue, at);
CREATE INDEX queue_starts_key_idx ON {schema}.queue_starts (queue, key, at)
    WHERE key IS NOT NULL;
