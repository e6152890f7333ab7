-- Children spawned at run time and signals from outside (docs/durable.md).
--
-- A child that ctx.spawn stored names its parent (spawned_by). A parent that called
-- ctx.wait_for is 'waiting' for its children (awaiting = 'children'), counting those
-- that have not ended (children_left); the last of them to end makes it pending again,
-- in that child's transaction, by the trigger below. A handler waiting for a signal
-- with no time limit is 'waiting' with awaiting = 'signal'; one with a time limit, and
-- a sleep, wait for their run_at (awaiting NULL), which the leader's wake.sql reads. A
-- signal (job_signals) is kept whether or not its job waits for it yet, and wakes a job
-- that waits for a signal or a time (signal_send.sql).
--
-- All NULL outside durable jobs: columns with no default rewrite nothing.
ALTER TABLE {schema}.jobs
    ADD COLUMN spawned_by    bigint,
    ADD COLUMN awaiting      text CHECK (awaiting IN ('children', 'signal')),
    ADD COLUMN children_left integer;

CREATE TABLE {schema}.job_signals (
    id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id  bigint      NOT NULL REFERENCES {schema}.jobs (id) ON DELETE CASCADE,
    name    text        NOT NULL,
    payload jsonb,
    sent_at timestamptz NOT NULL DEFAULT now()
);
-- A run's Nth wait for a name takes that name's Nth signal, in the order they came.
CREATE INDEX job_signals_job_idx ON {schema}.job_signals (job_id, name, id);

-- What one statement's changes of spawned jobs do to their parents, in that statement's
-- transaction, as workflow_step (migration 0019) does for a workflow's jobs:
--   a child that ended: its waiting parent counts it; at the last one the parent is
--     pending again, due at once. A child that failed or was cancelled (its on_failure
--     'cancel', the default; 'continue' counts it as done) cancels the parent instead.
--   a parent that has spawned children (children_left is not NULL: ctx.spawn sets it)
--     and ends cancelled or failed, waiting for them or still running: its children
--     that have not ended are cancelled, and those running asked to stop; theirs in
--     turn, one trigger level down.
-- Parents are locked in id order, as children ending in two transactions at once both
-- update them. As workflow_step's (migration 0023), the trigger's WHEN clause lets
-- through only the first such row of a statement, so that the function runs once per
-- statement and reads all of its rows from the transition tables; every other
-- statement on jobs pays the clause's expression per row, and nothing else. Its
-- statements are planned for the rows at hand (EXECUTE), as spawns are of any size.
-- Every name in it is schema-qualified or pg_catalog's.
CREATE FUNCTION {schema}.spawn_step() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    parents bigint[];
    stopped bigint[];
BEGIN
    EXECUTE $q$
        SELECT array_agg(DISTINCT n.spawned_by) FILTER (WHERE n.spawned_by IS NOT NULL
                   AND n.status IN ('completed', 'failed', 'cancelled')
                   AND o.status NOT IN ('completed', 'failed', 'cancelled')),
               array_agg(n.id) FILTER (WHERE n.children_left IS NOT NULL
                   AND o.status NOT IN ('completed', 'failed', 'cancelled')
                   AND n.status IN ('failed', 'cancelled'))
        FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
        WHERE (n.spawned_by IS NOT NULL AND o.status IS DISTINCT FROM n.status
               AND n.status IN ('completed', 'failed', 'cancelled'))
           OR (n.children_left IS NOT NULL
               AND o.status NOT IN ('completed', 'failed', 'cancelled')
               AND n.status IN ('failed', 'cancelled'))
    $q$ INTO parents, stopped;

    IF parents IS NOT NULL THEN
        EXECUTE $q$
        WITH ended AS (
            SELECT n.spawned_by AS id, count(*)::integer AS n,
                   min(n.id) FILTER (WHERE n.status <> 'completed'
                                       AND n.on_failure IS DISTINCT FROM 'continue') AS failed
            FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
            WHERE n.spawned_by = ANY($1)
              AND n.status IN ('completed', 'failed', 'cancelled')
              AND o.status NOT IN ('completed', 'failed', 'cancelled')
            GROUP BY n.spawned_by
        ), locked AS (
            SELECT j.id FROM {schema}.jobs AS j
            WHERE j.id = ANY($1) AND j.status = 'waiting' AND j.awaiting = 'children'
            ORDER BY j.id
            FOR UPDATE
        ), moved AS (
            UPDATE {schema}.jobs AS p
            SET children_left = p.children_left - e.n,
                status = CASE WHEN e.failed IS NOT NULL THEN 'cancelled'
                              WHEN p.children_left > e.n THEN 'waiting'
                              ELSE 'pending' END,
                awaiting = CASE WHEN e.failed IS NULL AND p.children_left <= e.n THEN NULL
                                ELSE p.awaiting END,
                run_at = CASE WHEN e.failed IS NULL AND p.children_left <= e.n THEN now()
                              ELSE p.run_at END,
                last_error = CASE WHEN e.failed IS NOT NULL
                                  THEN 'cancelled: its child job ' || e.failed
                                       || ' failed or was cancelled'
                                  ELSE p.last_error END,
                finished_at = CASE WHEN e.failed IS NOT NULL THEN now() END,
                updated_at = now()
            FROM ended AS e
            WHERE p.id = e.id AND p.status = 'waiting' AND p.awaiting = 'children'
              AND (SELECT count(*) FROM locked) >= 0
            RETURNING p.id, p.queue, p.status
        )
        SELECT count(*) FROM (
            SELECT pg_notify({channel}, '* ' || queue)
            FROM (SELECT DISTINCT queue FROM moved WHERE status = 'pending') AS q
            UNION ALL
            SELECT pg_notify({done_channel}, string_agg(id::text, ','))
            FROM moved WHERE status = 'cancelled' GROUP BY id / 300
        ) AS n
        $q$ USING parents;
    END IF;

    IF stopped IS NOT NULL THEN
        EXECUTE $q$
        WITH kids AS (
            SELECT j.id FROM {schema}.jobs AS j
            WHERE j.spawned_by = ANY($1)
              AND j.status IN ('blocked', 'pending', 'running', 'waiting')
            ORDER BY j.id
            FOR UPDATE
        ), cancelled AS (
            UPDATE {schema}.jobs AS c
            SET status = CASE WHEN c.status = 'running' THEN c.status ELSE 'cancelled' END,
                last_error = CASE WHEN c.status = 'running' THEN c.last_error
                                  ELSE 'cancelled: its parent job ' || c.spawned_by
                                       || ' was cancelled' END,
                finished_at = CASE WHEN c.status = 'running' THEN NULL ELSE now() END,
                cancel_requested_at = COALESCE(c.cancel_requested_at, now()),
                updated_at = now()
            WHERE c.id IN (SELECT id FROM kids)
              AND c.status IN ('blocked', 'pending', 'running', 'waiting')
            RETURNING c.id, c.status
        )
        SELECT count(*) FROM (
            SELECT pg_notify({cancel_channel}, id::text) FROM cancelled WHERE status = 'running'
            UNION ALL
            SELECT pg_notify({done_channel}, string_agg(id::text, ','))
            FROM cancelled WHERE status = 'cancelled' GROUP BY id / 300
        ) AS n
        $q$ USING stopped;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_spawn_step
    AFTER UPDATE ON {schema}.jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH ROW
    WHEN (((NEW.spawned_by IS NOT NULL AND OLD.status IS DISTINCT FROM NEW.status
           AND NEW.status IN ('completed', 'failed', 'cancelled'))
          OR (NEW.children_left IS NOT NULL
              AND OLD.status NOT IN ('completed', 'failed', 'cancelled')
              AND NEW.status IN ('failed', 'cancelled')))
          AND current_setting('jobqueue.spawn_step', true) IS DISTINCT FROM NEW.cmin::text
          AND set_config('jobqueue.spawn_step', NEW.cmin::text, true) IS NOT NULL)
    EXECUTE FUNCTION {schema}.spawn_step();

REVOKE EXECUTE ON FUNCTION {schema}.spawn_step() FROM PUBLIC;
