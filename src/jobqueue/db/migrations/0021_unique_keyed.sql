-- A unique job may carry a concurrency key (migration 0020): migration 0016's function,
-- which stores unique jobs as the schema's owner, takes one more argument for it. A
-- function's arguments are part of its name, so the old one is dropped, not replaced;
-- the roles granted it (`jobqueue grants`) need the grant again for the new one.

DROP FUNCTION {schema}.enqueue_unique(
    text, text, jsonb, integer, integer, timestamptz, float8, text, float8, timestamptz, jsonb
);

CREATE FUNCTION {schema}.enqueue_unique(
    type text, queue text, payload jsonb, priority integer, max_attempts integer,
    run_at timestamptz, delay_seconds float8, unique_key text, hold_seconds float8,
    now timestamptz, trace_context jsonb, concurrency_key text
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
     concurrency_key)
OVERRIDING SYSTEM VALUE
SELECT key.job_id, $1, $2, $3, $4, $5,
       COALESCE($6, COALESCE($10, now()) + make_interval(secs => COALESCE($7, 0))), $8, $11,
       $12
FROM key
RETURNING *
$$;

REVOKE EXECUTE ON FUNCTION {schema}.enqueue_unique(
    text, text, jsonb, integer, integer, timestamptz, float8, text, float8, timestamptz, jsonb,
    text
) FROM PUBLIC;
