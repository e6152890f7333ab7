-- Workflows (docs/workflows.md): jobs that wait for other jobs.
--
-- A job with parents is stored 'blocked'. The claim index is partial on 'pending', so a
-- blocked job costs the claim nothing however many wait. Each blocked job counts the
-- parents it still waits for (parents_left); the edges table, keyed by parent, says
-- whose children a job has. When a workflow job ends, a row trigger runs one UPDATE
-- of that job's own children, in the transaction that ended it: no poller, no scan.
-- Two parents ending at once in two transactions both update the child's row; the
-- second waits for the first's row lock and re-reads the row, so the count goes down
-- once per parent and exactly one of them finds it at its last parent.
--
-- The trigger fires only for rows of workflows whose state changed to or from an end
-- (its WHEN clause, evaluated without calling any function): other jobs pay nothing.

CREATE TABLE {schema}.workflows (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE {schema}.workflow_edges (
    parent_id bigint NOT NULL,
    child_id  bigint NOT NULL,
    PRIMARY KEY (parent_id, child_id)
);
-- A child's parents: its parent_results, and the counts a retry recomputes.
CREATE INDEX workflow_edges_child_idx ON {schema}.workflow_edges (child_id);

-- All NULL for a job outside workflows (no default: adding them rewrites nothing).
ALTER TABLE {schema}.jobs
    ADD COLUMN workflow_id   bigint,
    ADD COLUMN workflow_ref  text,
    -- Parents not ended yet (or, for a parent that failed, not counted as done).
    ADD COLUMN parents_left  integer,
    -- Parents that ended failed or cancelled and were counted as done.
    ADD COLUMN parents_failed integer,
    -- When this job fails for good (or is cancelled): 'cancel' its blocked descendants,
    -- or 'continue': its children count it as done and run.
    ADD COLUMN on_failure    text CHECK (on_failure IN ('cancel', 'continue')),
    -- When this job runs: once every parent 'completed' (a failed one cancels it unless
    -- that parent continues), once every parent 'finished' whatever its end, or only if
    -- one 'failed' (cancelled once all completed): batch callbacks.
    ADD COLUMN run_if        text CHECK (run_if IN ('completed', 'finished', 'failed')),
    -- The job whose failure cancelled this one: retrying it resumes this one.
    ADD COLUMN cancelled_by  bigint;

ALTER TABLE {schema}.jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE {schema}.jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('blocked', 'pending', 'running', 'completed', 'failed', 'cancelled'));

CREATE INDEX jobs_workflow_idx ON {schema}.jobs (workflow_id) WHERE workflow_id IS NOT NULL;

-- A blocked job holds its unique key as a pending one does.
CREATE OR REPLACE FUNCTION {schema}.release_unique_keys() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE {schema}.unique_keys AS k
    SET held_until = CASE
            WHEN n.status IN ('blocked', 'pending', 'running') THEN 'infinity'
            WHEN n.status = 'completed'
                THEN now() + make_interval(secs => COALESCE(k.hold_seconds, 0))
            ELSE now()
        END
    FROM new_rows AS n
    WHERE n.unique_key IS NOT NULL AND k.key = n.unique_key AND k.job_id = n.id;
    RETURN NULL;
END;
$$;

-- One workflow job's change of state, for its own children only.
--   completed: each blocked child counts it; a child at its last parent is pending.
--   failed or cancelled: the children that continue count it (and the failure); the
--     others, and their own descendants that would not run either, are cancelled.
--   failed or cancelled, then pending again (a manual retry): the jobs its failure
--     cancelled are blocked again, and the children that had counted it wait for it.
-- Released children are announced as "* <queue>" (migration 0011); jobs it cancels on
-- the done channel, for whoever waits on them.
CREATE FUNCTION {schema}.workflow_step() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    told integer;
BEGIN
    IF NEW.status = 'completed' OR (NEW.status IN ('failed', 'cancelled')
                                    AND COALESCE(NEW.on_failure, 'cancel') = 'continue') THEN
        WITH released AS (
            UPDATE {schema}.jobs AS c
            SET parents_left = c.parents_left - 1,
                parents_failed = c.parents_failed + (NEW.status <> 'completed')::integer,
                status = CASE
                    WHEN c.parents_left > 1 THEN 'blocked'
                    WHEN c.run_if = 'failed'
                         AND c.parents_failed + (NEW.status <> 'completed')::integer = 0
                        THEN 'cancelled'
                    ELSE 'pending' END,
                run_at = CASE WHEN c.parents_left > 1 THEN c.run_at
                              ELSE GREATEST(c.run_at, now()) END,
                finished_at = CASE WHEN c.parents_left = 1 AND c.run_if = 'failed'
                                        AND c.parents_failed
                                            + (NEW.status <> 'completed')::integer = 0
                                   THEN now() END,
                updated_at = now()
            FROM {schema}.workflow_edges AS e
            WHERE e.parent_id = NEW.id AND c.id = e.child_id AND c.status = 'blocked'
            RETURNING c.id, c.queue, c.status
        )
        SELECT count(*) INTO told FROM (
            SELECT pg_notify(TG_TABLE_SCHEMA || '_jobs', '* ' || queue)
            FROM (SELECT DISTINCT queue FROM released WHERE status = 'pending') AS q
            UNION ALL
            SELECT pg_notify(TG_TABLE_SCHEMA || '_done', id::text)
            FROM released WHERE status = 'cancelled'
        ) AS n;
    ELSIF NEW.status IN ('failed', 'cancelled') THEN
        -- Children that run whatever their parents' end count this one as done.
        WITH counted AS (
            UPDATE {schema}.jobs AS c
            SET parents_left = c.parents_left - 1,
                parents_failed = c.parents_failed + 1,
                status = CASE WHEN c.parents_left > 1 THEN 'blocked' ELSE 'pending' END,
                run_at = CASE WHEN c.parents_left > 1 THEN c.run_at
                              ELSE GREATEST(c.run_at, now()) END,
                updated_at = now()
            FROM {schema}.workflow_edges AS e
            WHERE e.parent_id = NEW.id AND c.id = e.child_id AND c.status = 'blocked'
              AND c.run_if IN ('finished', 'failed')
            RETURNING c.queue, c.status
        )
        SELECT count(*) INTO told FROM (
            SELECT pg_notify(TG_TABLE_SCHEMA || '_jobs', '* ' || queue)
            FROM (SELECT DISTINCT queue FROM counted WHERE status = 'pending') AS q
        ) AS n;
        -- The rest cannot run: cancelled with every descendant that waits on them in
        -- the same way, in one statement (a chain of any length, no trigger recursion:
        -- each job cancelled here fires this function once more, and finds its children
        -- cancelled already, or counts those that run whatever).
        WITH RECURSIVE doomed(id) AS (
            SELECT c.id
            FROM {schema}.workflow_edges AS e
            JOIN {schema}.jobs AS c ON c.id = e.child_id
            WHERE e.parent_id = NEW.id AND c.status = 'blocked' AND c.run_if = 'completed'
            UNION
            SELECT c.id
            FROM doomed AS d
            JOIN {schema}.jobs AS x ON x.id = d.id
            JOIN {schema}.workflow_edges AS e ON e.parent_id = d.id
            JOIN {schema}.jobs AS c ON c.id = e.child_id
            WHERE x.on_failure = 'cancel' AND c.status = 'blocked' AND c.run_if = 'completed'
        ), cancelled AS (
            UPDATE {schema}.jobs AS c
            SET status = 'cancelled',
                cancelled_by = COALESCE(NEW.cancelled_by, NEW.id),
                last_error = 'not run: job ' || NEW.id || ' ended ' || NEW.status,
                finished_at = now(),
                updated_at = now()
            WHERE c.id = ANY(ARRAY(SELECT id FROM doomed ORDER BY id)) AND c.status = 'blocked'
            RETURNING c.id
        )
        SELECT count(*) INTO told FROM (
            SELECT pg_notify(TG_TABLE_SCHEMA || '_done', string_agg(id::text, ','))
            FROM cancelled GROUP BY id / 300
        ) AS n;
    ELSIF NEW.status = 'pending' AND OLD.status IN ('failed', 'cancelled') THEN
        -- Retried: children that had counted it wait for it again...
        UPDATE {schema}.jobs AS c
        SET parents_left = c.parents_left + 1,
            parents_failed = c.parents_failed - 1,
            updated_at = now()
        FROM {schema}.workflow_edges AS e
        WHERE e.parent_id = NEW.id AND c.id = e.child_id AND c.status = 'blocked'
          AND c.cancelled_by IS NULL AND c.parents_failed > 0;
        -- ...and what its failure cancelled is blocked again, each job waiting for its
        -- parents that have not completed (this one among them, or one resumed here).
        UPDATE {schema}.jobs AS c
        SET status = 'blocked',
            cancelled_by = NULL,
            last_error = NULL,
            finished_at = NULL,
            parents_failed = 0,
            parents_left = (SELECT count(*) FROM {schema}.workflow_edges AS e
                            JOIN {schema}.jobs AS p ON p.id = e.parent_id
                            WHERE e.child_id = c.id AND p.status <> 'completed'),
            updated_at = now()
        WHERE c.workflow_id = NEW.workflow_id AND c.cancelled_by = NEW.id
          AND c.status = 'cancelled';
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_workflow_step
    AFTER UPDATE OF status ON {schema}.jobs
    FOR EACH ROW
    WHEN (NEW.workflow_id IS NOT NULL AND OLD.status IS DISTINCT FROM NEW.status
          AND (NEW.status IN ('completed', 'failed', 'cancelled')
               OR OLD.status IN ('failed', 'cancelled')))
    EXECUTE FUNCTION {schema}.workflow_step();

REVOKE EXECUTE ON FUNCTION {schema}.workflow_step() FROM PUBLIC;
