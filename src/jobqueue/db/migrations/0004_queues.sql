-- Queues an operator has acted on (paused). A queue exists by having jobs; a row
-- here only records its controls.
CREATE TABLE {schema}.queues (
    name       text        PRIMARY KEY,
    paused_at  timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Job counts by queue and state, kept current by the triggers below, so that
-- GET /queues reads a few dozen rows instead of counting millions.
--
-- Each statement adds its net change once (not once per row), to the row of its
-- backend's shard: two connections rarely touch the same row, so a commit waiting
-- for its WAL flush does not hold up the others behind a row lock. Readers sum
-- the shards. fillfactor leaves room for HOT updates of these hot rows.
CREATE TABLE {schema}.queue_counts (
    queue  text    NOT NULL,
    status text    NOT NULL,
    shard  integer NOT NULL,
    n      bigint  NOT NULL,
    PRIMARY KEY (queue, status, shard)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500);

INSERT INTO {schema}.queue_counts (queue, status, shard, n)
SELECT queue, status, 0, count(*) FROM {schema}.jobs GROUP BY queue, status;

CREATE FUNCTION {schema}.count_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO {schema}.queue_counts AS c (queue, status, shard, n)
        SELECT queue, status, pg_backend_pid() % 64, count(*)
        FROM new_rows GROUP BY queue, status
        ON CONFLICT (queue, status, shard) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO {schema}.queue_counts AS c (queue, status, shard, n)
        SELECT queue, status, pg_backend_pid() % 64, -count(*)
        FROM old_rows GROUP BY queue, status
        ON CONFLICT (queue, status, shard) DO UPDATE SET n = c.n + excluded.n;
    ELSE
        INSERT INTO {schema}.queue_counts AS c (queue, status, shard, n)
        SELECT queue, status, pg_backend_pid() % 64, sum(d)
        FROM (SELECT queue, status, 1 AS d FROM new_rows
              UNION ALL
              SELECT queue, status, -1 FROM old_rows) AS changes
        GROUP BY queue, status
        HAVING sum(d) <> 0
        ON CONFLICT (queue, status, shard) DO UPDATE SET n = c.n + excluded.n;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_count_inserted
    AFTER INSERT ON {schema}.jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.count_jobs();

CREATE TRIGGER jobs_count_updated
    AFTER UPDATE ON {schema}.jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.count_jobs();

CREATE TRIGGER jobs_count_deleted
    AFTER DELETE ON {schema}.jobs
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.count_jobs();

CREATE FUNCTION {schema}.count_jobs_truncated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {schema}.queue_counts;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_count_truncated
    AFTER TRUNCATE ON {schema}.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.count_jobs_truncated();
