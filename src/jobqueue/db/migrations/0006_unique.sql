-- Unique jobs: at most one job per key at a time. The key row says which job holds
-- it and until when: 'infinity' while that job is pending or running, the end of its
-- hold period once it completed, and the moment it ended if it failed or was
-- cancelled (so the key is free again at once).
--
-- The decision to take a key reads only this row, never the jobs table: the upsert
-- that takes it re-reads the row's latest version when it waits on a concurrent
-- enqueue, whereas a look at the jobs table would use a snapshot taken before that
-- enqueue committed, and two enqueues could both take the key.
CREATE TABLE {schema}.unique_keys (
    key          text        PRIMARY KEY,
    job_id       bigint      NOT NULL,
    hold_seconds float8,
    held_until   timestamptz NOT NULL DEFAULT 'infinity'
);

CREATE INDEX unique_keys_expiry_idx ON {schema}.unique_keys (held_until)
    WHERE held_until <> 'infinity';

ALTER TABLE {schema}.jobs ADD COLUMN unique_key text;

-- Keeps held_until in step with the job holding the key, in the same transaction.
CREATE FUNCTION {schema}.release_unique_keys() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {schema}.unique_keys AS k
    SET held_until = CASE
            WHEN n.status IN ('pending', 'running') THEN 'infinity'
            WHEN n.status = 'completed'
                THEN now() + make_interval(secs => COALESCE(k.hold_seconds, 0))
            ELSE now()
        END
    FROM new_rows AS n
    WHERE n.unique_key IS NOT NULL AND k.key = n.unique_key AND k.job_id = n.id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_unique_keys
    AFTER UPDATE ON {schema}.jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.release_unique_keys();
