-- The jobs table and everything the claim path needs.
-- "{schema}" is replaced by the configured schema (a quoted identifier) when the file is loaded.

CREATE TABLE {schema}.jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    type             text        NOT NULL CHECK (type <> ''),
    queue            text        NOT NULL DEFAULT 'default' CHECK (queue <> ''),
    payload          jsonb       NOT NULL DEFAULT '{}',
    status           text        NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    priority         integer     NOT NULL DEFAULT 0,
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts     integer     NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
    run_at           timestamptz NOT NULL DEFAULT now(),
    last_error       text,
    worker_id        text,
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz
);

-- The claim path reads only pending rows, so its cost does not grow with the
-- finished jobs the table keeps.
CREATE INDEX jobs_claim_idx ON {schema}.jobs (queue, priority, run_at, id)
    WHERE status = 'pending';

-- Listing dead letters newest first. A full (status, id) index would cost an
-- index insertion on every claim and completion; the common states are found
-- quickly enough by walking the primary key.
CREATE INDEX jobs_dead_idx ON {schema}.jobs (id)
    WHERE status IN ('failed', 'cancelled');

-- Finding running jobs whose lease ran out.
CREATE INDEX jobs_lease_idx ON {schema}.jobs (lease_expires_at)
    WHERE status = 'running';

-- One NOTIFY per statement and queue, whatever inserted the rows (the API, the
-- Python API inside an application's transaction, COPY). The payload is only the
-- queue name; jobs scheduled for later are found by the fallback poll instead.
CREATE FUNCTION {schema}.notify_jobs_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '_jobs', q.queue)
    FROM (SELECT DISTINCT queue FROM inserted WHERE run_at <= now()) AS q;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_notify_inserted
    AFTER INSERT ON {schema}.jobs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.notify_jobs_inserted();
