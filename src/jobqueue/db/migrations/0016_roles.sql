-- Least-privilege database roles (docs/database-roles.md, `jobqueue grants`). The schema's
-- owner runs migrations and bypasses all of this; the statements below only matter to
-- the roles the owner grants privileges to.
--
-- 1. Triggers write other tables as the schema's owner, not as whoever changed the jobs:
-- a role that may only insert jobs needs no privilege on the counters, and nobody can
-- forge them. Schema-qualified bodies, and a fixed search_path, so that no object of
-- the caller's can stand in for a built-in one (a function or operator of the same name).
ALTER FUNCTION {schema}.count_jobs() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION {schema}.count_jobs_truncated()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION {schema}.release_unique_keys()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- 2. Rows of jobs: row-level security, with one policy that lets every role see and
-- change every row, as before this migration; privileges alone decide what a role may
-- do. `jobqueue grants --for enqueue` adds a restrictive policy for that role only:
-- it sees the rows it inserts as it inserts them (INSERT ... RETURNING), and no stored
-- row. A policy that is constant true costs nothing: the planner drops it, and the
-- plans of every role it alone applies to (the owner's, the workers', the API's) stay
-- as they were. A policy that is not constant would cost them: PostgreSQL evaluates it
-- before every condition it does not know to be leakproof, and such a condition (a
-- COALESCE, as in the claim's `run_at <= COALESCE($5, now())`) can then no longer be
-- an index condition. Hence the restriction is the enqueue role's policy alone.
ALTER TABLE {schema}.jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY jobs_all ON {schema}.jobs USING (true) WITH CHECK (true);

-- 3. What enqueueing under a unique key must read and write beyond the new row: the key
-- row (taken or refused) and, when refused, the job holding it. Run as the owner, so
-- that the enqueue role needs no privilege on unique_keys (it could free other jobs'
-- keys) nor on stored jobs: it learns the holder of a key it names, which is what
-- enqueue() answers with anyway. The statements are those enqueue_unique.sql and
-- unique_holder.sql ran before; those files now call these.
CREATE FUNCTION {schema}.enqueue_unique(
    type text, queue text, payload jsonb, priority integer, max_attempts integer,
    run_at timestamptz, delay_seconds float8, unique_key text, hold_seconds float8,
    now timestamptz, trace_context jsonb
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
    (id, type, queue, payload, priority, max_attempts, run_at, unique_key, trace_context)
OVERRIDING SYSTEM VALUE
SELECT key.job_id, $1, $2, $3, $4, $5,
       COALESCE($6, COALESCE($10, now()) + make_interval(secs => COALESCE($7, 0))), $8, $11
FROM key
RETURNING *
$$;

CREATE FUNCTION {schema}.unique_holder(unique_key text) RETURNS SETOF {schema}.jobs
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
SELECT j.*
FROM {schema}.unique_keys AS k
JOIN {schema}.jobs AS j ON j.id = k.job_id
WHERE k.key = $1
$$;

-- Functions are executable by everyone unless revoked; these run as the owner, so only
-- the roles granted them (`jobqueue grants`) may call them.
REVOKE EXECUTE ON FUNCTION {schema}.enqueue_unique(
    text, text, jsonb, integer, integer, timestamptz, float8, text, float8, timestamptz, jsonb
) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION {schema}.unique_holder(text) FROM PUBLIC;
