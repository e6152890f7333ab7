-- Tags and metadata (docs/search.md): a job may carry up to 16 tags and a JSON object of
-- metadata, set at enqueue and by PATCH /jobs/{id}, and GET /jobs finds jobs by them.
-- Both columns are NULL for a job that has none, and both indexes are partial, so that
-- a job without tags or metadata costs nothing more to store, claim or complete than
-- before: no index entry, and a NULL takes no space in the row (its null bitmap).
-- Adding a column with no default rewrites nothing, at any size of the table.
ALTER TABLE {schema}.jobs ADD COLUMN tags text[], ADD COLUMN meta jsonb;

-- GIN, as array containment (tags @> '{import}') and jsonb containment
-- (meta @> '{"customer": "acme"}') use them. jsonb_path_ops indexes each path to a
-- value as one hash: a third of the size of the default opclass, and containment is
-- the one operator the search uses.
CREATE INDEX jobs_tags_idx ON {schema}.jobs USING gin (tags) WHERE tags IS NOT NULL;
CREATE INDEX jobs_meta_idx ON {schema}.jobs USING gin (meta jsonb_path_ops)
    WHERE meta IS NOT NULL;

-- A schedule's jobs carry its tags and metadata.
ALTER TABLE {schema}.schedules ADD COLUMN tags text[], ADD COLUMN meta jsonb;

-- The unique enqueues (migrations 0021, 0029) take the two columns as two more
-- arguments. The old functions stay, for processes of the release before this one, which
-- may run beside this one's: a function's arguments are part of its name, so these are
-- new functions beside them, granted to every role the old ones are granted to.
CREATE FUNCTION {schema}.enqueue_unique(
    type text, queue text, payload jsonb, priority integer, max_attempts integer,
    run_at timestamptz, delay_seconds float8, unique_key text, hold_seconds float8,
    now timestamptz, trace_context jsonb, concurrency_key text, tags text[], meta jsonb
) RETURNS SETOF {schema}.jobs
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
WITH new_job AS (
    SELECT nextval(pg_get_serial_sequence('{schema}.jobs', 'id')) AS id
), key AS (
    INSERT INTO {schema}.unique_keys AS k (key, job_id, hold_seconds)
    SELECT $8, id, $9 FROM new_job
    ON CONFLICT (key) DO UPDATE
        SET job_id = excluded.job_id, hold_seconds = excluded.hold_seconds,
            held_until = 'infinity'
        WHERE k.held_until <= COALESCE($10, now())
    RETURNING job_id
)
INSERT INTO {schema}.jobs
    (id, type, queue, payload, priority, max_attempts, run_at, unique_key, trace_context,
     concurrency_key, tags, meta)
OVERRIDING SYSTEM VALUE
SELECT key.job_id, $1, $2, $3, $4, $5,
       COALESCE($6, COALESCE($10, now()) + make_interval(secs => COALESCE($7, 0))), $8, $11,
       $12, $13, $14
FROM key
RETURNING *
$$;

-- As migration 0029's, with tags and metadata: a replaced or debounced holder takes
-- the new job's tags and metadata where it gives them, and keeps its own where not.
CREATE FUNCTION {schema}.enqueue_unique_replacing(
    type text, queue text, payload jsonb, priority integer, max_attempts integer,
    run_at timestamptz, delay_seconds double precision, unique_key text,
    hold_seconds double precision, now timestamptz, trace_context jsonb,
    concurrency_key text, debounce boolean, tags text[], meta jsonb
) RETURNS TABLE (created boolean, job {schema}.jobs)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    clock timestamptz := COALESCE(now, pg_catalog.now());
    due timestamptz := COALESCE(run_at, clock + make_interval(secs => COALESCE(delay_seconds, 0)));
    new_id bigint;
    taken bigint;
    holder {schema}.jobs;
BEGIN
    FOR attempt IN 1..3 LOOP
        new_id := nextval(pg_get_serial_sequence('{schema}.jobs', 'id'));
        INSERT INTO {schema}.unique_keys AS k (key, job_id, hold_seconds)
        VALUES (unique_key, new_id, hold_seconds)
        ON CONFLICT (key) DO UPDATE
            SET job_id = excluded.job_id, hold_seconds = excluded.hold_seconds,
                held_until = 'infinity'
            WHERE k.held_until <= clock
        RETURNING k.job_id INTO taken;
        IF taken IS NULL THEN  -- held: the key's row is locked now; lock its holder too
            SELECT j.* INTO holder
            FROM {schema}.unique_keys AS k JOIN {schema}.jobs AS j ON j.id = k.job_id
            WHERE k.key = unique_key
            FOR UPDATE OF j;
            IF NOT FOUND THEN
                CONTINUE;  -- its holder went (deleted) since: the key is to be retaken
            END IF;
            IF holder.status = 'pending' THEN
                RETURN QUERY
                UPDATE {schema}.jobs AS j
                SET payload = enqueue_unique_replacing.payload,
                    priority = CASE WHEN debounce THEN j.priority
                                    ELSE enqueue_unique_replacing.priority END,
                    run_at = CASE WHEN debounce
                                  THEN clock + make_interval(secs => COALESCE(delay_seconds, 0))
                                  ELSE due END,
                    tags = COALESCE(enqueue_unique_replacing.tags, j.tags),
                    meta = COALESCE(enqueue_unique_replacing.meta, j.meta),
                    -- the time of this change, after the wait for the key: the order
                    -- in which concurrent enqueues of one key changed it
                    updated_at = CASE WHEN now IS NULL THEN clock_timestamp() ELSE clock END
                WHERE j.id = holder.id
                RETURNING false, j;
                PERFORM pg_notify(
                    (SELECT n.nspname FROM pg_class AS c JOIN pg_namespace AS n
                       ON n.oid = c.relnamespace WHERE c.oid = '{schema}.jobs'::regclass)
                    || '_jobs', '* ' || holder.queue);
                RETURN;
            END IF;
            IF holder.status NOT IN ('running', 'blocked') THEN
                RETURN QUERY SELECT false, holder;  -- ended, within its hold
                RETURN;
            END IF;
            UPDATE {schema}.unique_keys AS k
            SET job_id = new_id, hold_seconds = enqueue_unique_replacing.hold_seconds,
                held_until = 'infinity'
            WHERE k.key = unique_key;
        END IF;
        RETURN QUERY
        INSERT INTO {schema}.jobs AS j
            (id, type, queue, payload, priority, max_attempts, run_at, unique_key,
             trace_context, concurrency_key, tags, meta)
        OVERRIDING SYSTEM VALUE
        VALUES (new_id, enqueue_unique_replacing.type, enqueue_unique_replacing.queue,
                enqueue_unique_replacing.payload, enqueue_unique_replacing.priority,
                enqueue_unique_replacing.max_attempts, due, unique_key,
                enqueue_unique_replacing.trace_context,
                enqueue_unique_replacing.concurrency_key, enqueue_unique_replacing.tags,
                enqueue_unique_replacing.meta)
        RETURNING true, j;
        RETURN;
    END LOOP;
    RAISE EXCEPTION 'unique key % kept changing hands; try again', unique_key;
END;
$$;

REVOKE EXECUTE ON FUNCTION {schema}.enqueue_unique(
    text, text, jsonb, integer, integer, timestamptz, float8, text, float8, timestamptz, jsonb,
    text, text[], jsonb
) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION {schema}.enqueue_unique_replacing(
    text, text, jsonb, integer, integer, timestamptz, float8, text, float8, timestamptz, jsonb,
    text, boolean, text[], jsonb
) FROM PUBLIC;

-- Whoever may call the old functions (`jobqueue grants`, run before this migration) may
-- call the new ones, and an enqueue role, which may insert only the columns an enqueue
-- writes, may write these two: the processes of this release write them in every
-- enqueue (as NULL for none), and must not wait for the grants to be run again.
DO $$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole::text
        FROM pg_attribute AS c, aclexplode(c.attacl) AS a
        WHERE c.attrelid = '{schema}.jobs'::regclass AND c.attname = 'type'
          AND a.privilege_type = 'INSERT' AND a.grantee <> 0
    LOOP
        EXECUTE format('GRANT INSERT (tags, meta) ON {schema}.jobs TO %s', grantee);
    END LOOP;
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole::text
        FROM pg_proc AS p, aclexplode(p.proacl) AS a
        WHERE p.oid = '{schema}.enqueue_unique(text, text, jsonb, integer, integer, '
                      'timestamptz, float8, text, float8, timestamptz, jsonb, text)'::regprocedure
          AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION {schema}.enqueue_unique(text, text, jsonb, '
                       'integer, integer, timestamptz, float8, text, float8, timestamptz, '
                       'jsonb, text, text[], jsonb) TO %s', grantee);
        EXECUTE format('GRANT EXECUTE ON FUNCTION {schema}.enqueue_unique_replacing(text, '
                       'text, jsonb, integer, integer, timestamptz, float8, text, float8, '
                       'timestamptz, jsonb, text, boolean, text[], jsonb) TO %s', grantee);
    END LOOP;
END;
$$;
