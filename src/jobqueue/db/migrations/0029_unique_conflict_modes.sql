-- Unique keys' conflict modes (docs/unique-jobs.md#when-the-key-is-taken): what an
-- enqueue under a held key does, besides answering with the holder (enqueue_unique,
-- migration 0021). With debounce false ("replace"), a pending holder gets the new
-- payload, priority and run time, and keeps its id; with debounce true, its payload
-- and a run time of now + delay, so that a burst of events runs once, after the last.
-- A holder that is running (or blocked in a workflow) is never changed: a new job is
-- enqueued behind it, and the key moves to that job. A holder that ended within its
-- hold (unique_for) is answered as it is. Concurrent enqueues of one key queue on the
-- key's row, each seeing what the one before it committed. Returns the job, and
-- whether it is new. Run as the schema's owner, as enqueue_unique is.
CREATE FUNCTION {schema}.enqueue_unique_replacing(
    type text, queue text, payload jsonb, priority integer, max_attempts integer,
    run_at timestamptz, delay_seconds double precision, unique_key text,
    hold_seconds double precision, now timestamptz, trace_context jsonb,
    concurrency_key text, debounce boolean
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
             trace_context, concurrency_key)
        OVERRIDING SYSTEM VALUE
        VALUES (new_id, enqueue_unique_replacing.type, enqueue_unique_replacing.queue,
                enqueue_unique_replacing.payload, enqueue_unique_replacing.priority,
                enqueue_unique_replacing.max_attempts, due, unique_key,
                enqueue_unique_replacing.trace_context,
                enqueue_unique_replacing.concurrency_key)
        RETURNING true, j;
        RETURN;
    END LOOP;
    RAISE EXCEPTION 'unique key % kept changing hands; try again', unique_key;
END;
$$;
