-- Durable sleep (docs/durable.md#durable-sleep): a job whose handler called ctx.sleep
-- is 'waiting' until its run_at, holding no worker's slot and no lease; the leader
-- makes it pending again at that time (wake.sql), and its next run replays its steps.
-- NOT VALID: the rows there already pass the narrower check, and validating them
-- here would read the whole table under this statement's lock; the next migration
-- validates it without blocking writes.
ALTER TABLE {schema}.jobs DROP CONSTRAINT jobs_status_check,
    ADD CONSTRAINT jobs_status_check CHECK (status IN (
        'blocked', 'pending', 'running', 'completed', 'failed', 'cancelled', 'waiting'
    )) NOT VALID;

-- A waiting job holds its unique key as a pending one does.
CREATE OR REPLACE FUNCTION {schema}.release_unique_keys() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE {schema}.unique_keys AS k
    SET held_until = CASE
            WHEN n.status IN ('blocked', 'pending', 'running', 'waiting') THEN 'infinity'
            WHEN n.status = 'completed'
                THEN now() + make_interval(secs => COALESCE(k.hold_seconds, 0))
            ELSE now()
        END
    FROM new_rows AS n
    WHERE n.unique_key IS NOT NULL AND k.key = n.unique_key AND k.job_id = n.id;
    RETURN NULL;
END;
$$;
