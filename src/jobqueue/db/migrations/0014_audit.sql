-- The audit log: one row per control action (retry, cancel, pause, resume, tokens),
-- written in the action's own transaction (jobqueue.audit), so that no action commits
-- without its row. Refused actions (a missing job, a job in the wrong state) are rows
-- too, with their result.
-- target: the job id, queue name or token name acted on; filter: a bulk action's
-- filters (JSON). count: the jobs the action touched (NULL for a queue or a token).
-- client: the HTTP client's address as the server saw it (NULL from the CLI); text, not
-- inet, since a server behind a proxy or on a socket may report something else.
CREATE TABLE {schema}.audit_log (
    id     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at     timestamptz NOT NULL DEFAULT now(),
    actor  text        NOT NULL,
    action text        NOT NULL,
    target text,
    filter jsonb,
    count  integer,
    client text,
    result text        NOT NULL DEFAULT 'ok'
);

-- The listing reads the primary key backwards (newest first, keyset on id). Retention
-- deletes the oldest rows by time: this index finds them without reading the rest.
CREATE INDEX audit_log_at_idx ON {schema}.audit_log (at);
