-- Workflows (docs/workflows.md): jobs that wait for other jobs.
--
-- A job with parents is stored 'blocked'. The claim index is partial on 'pending', so a
-- blocked job costs the claim nothing however many wait. Each blocked job counts the
-- parents it still waits for (parents_left); the edges table, keyed by parent, says
-- whose children a job has. When workflow jobs end, a trigger runs one UPDATE of
-- their own children (found through the edges' primary key), in the statement's
-- transaction: no poller, no scan.

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

-- What one statement's changes of workflow jobs do to their children, for those
-- children only, in that statement's transaction:
--   completed: each blocked child counts it; a child at its last parent is pending.
--   failed or cancelled: the children that run whatever (run_if finished or failed),
--     and every child of a job whose on_failure is continue, count it (and the
--     failure); the others, and their descendants that would not run either, are
--     cancelled, in one statement (a chain of any length, no recursion of triggers).
--   failed or cancelled, then pending again (a manual retry): the jobs its failure
--     cancelled are blocked again, and the children that had counted it wait for it.
-- Once per statement, not per parent: a child with many parents ending in one
-- statement (a chord's callback, as the completer writes a batch of completions) is
-- updated once, so that its row does not pile up versions. Children are locked in id
-- order, as parents ending in two transactions at once both update them: the second
-- waits for the first's lock and re-reads the row, so each parent is counted once and
-- exactly one of them finds the child at its last parent.
--
-- A row trigger whose WHEN clause (evaluated without calling anything) keeps it for the
-- rows of workflow jobs that ended or were retried: every other statement on jobs pays
-- nothing. Its first call in a statement does the work for all of the statement's rows
-- (its transition tables) and leaves the others a count of calls to skip, in a
-- setting local to the transaction and per trigger depth (the statements it runs fire
-- it one level down). The work's statements are planned for the rows at hand
-- (EXECUTE): a plan cached for one row would join 10,000 released children with
-- themselves in a nested loop.
-- Released children are announced as "* <queue>" (migration 0011); jobs it ends, on
-- the done channel, for whoever waits on them.
-- It runs as whoever changed the jobs (the roles that change jobs may read the edges,
-- db/grants.py). Every name in it is schema-qualified or pg_catalog's.
CREATE FUNCTION {schema}.workflow_step() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    slot constant text := 'jobqueue.workflow_step_' || pg_trigger_depth();
    skip integer := COALESCE(NULLIF(current_setting(slot, true), ''), '0')::integer;
    calls integer;
    ended bigint[];
    failed bigint[];
    retried bigint[];
BEGIN
    IF skip > 0 THEN  -- a later row of a statement whose first call did the work
        PERFORM set_config(slot, (skip - 1)::text, true);
        RETURN NULL;
    END IF;
    -- The rows the WHEN clause lets through, one call each.
    EXECUTE $q$
        SELECT count(*),
               array_agg(n.id) FILTER (WHERE n.status IN ('completed', 'failed', 'cancelled')
                                         AND o.status NOT IN ('completed', 'failed', 'cancelled')),
               array_agg(n.id) FILTER (WHERE n.status IN ('failed', 'cancelled')
                                         AND o.status NOT IN ('completed', 'failed', 'cancelled')
                                         AND n.on_failure = 'cancel'),
               array_agg(n.id) FILTER (WHERE n.status = 'pending'
                                         AND o.status IN ('failed', 'cancelled'))
        FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
        WHERE n.workflow_id IS NOT NULL AND o.status IS DISTINCT FROM n.status
          AND (n.status IN ('completed', 'failed', 'cancelled')
               OR o.status IN ('failed', 'cancelled'))
    $q$ INTO calls, ended, failed, retried;
    PERFORM set_config(slot, (calls - 1)::text, true);

    IF ended IS NOT NULL THEN
        EXECUTE $q$
        -- Per blocked child, the parents that ended here and that it counts as done
        -- (a completed one; a failed or cancelled one that lets it run, or any if it
        -- runs whatever), and how many of those did not complete.
        WITH counts AS (
            SELECT e.child_id AS id, max(c.parents_left) AS parents_left,
                   (count(*) FILTER (WHERE p.status = 'completed' OR p.on_failure = 'continue'
                                       OR c.run_if IN ('finished', 'failed')))::integer AS done,
                   (count(*) FILTER (WHERE p.status <> 'completed'
                                       AND (p.on_failure = 'continue'
                                            OR c.run_if IN ('finished', 'failed'))))::integer
                       AS failed
            FROM {schema}.workflow_edges AS e
            JOIN {schema}.jobs AS p ON p.id = e.parent_id
            JOIN {schema}.jobs AS c ON c.id = e.child_id
            WHERE e.parent_id = ANY($1) AND c.status = 'blocked'
            GROUP BY e.child_id
        ), locked AS (
            -- A child that still waits for another parent may meet that parent's
            -- transaction: those are locked first, in id order, so that two such
            -- transactions queue instead of deadlocking. The others (a fan-out's
            -- children, a chain's next job) have no other writer to meet.
            SELECT j.id FROM {schema}.jobs AS j
            WHERE j.id IN (SELECT id FROM counts WHERE parents_left > done)
              AND j.status = 'blocked'
            ORDER BY j.id
            FOR UPDATE
        ), released AS (
            UPDATE {schema}.jobs AS c
            SET parents_left = c.parents_left - d.done,
                parents_failed = c.parents_failed + d.failed,
                status = CASE
                    WHEN c.parents_left > d.done THEN 'blocked'
                    WHEN c.run_if = 'failed' AND c.parents_failed + d.failed = 0
                        THEN 'cancelled'
                    ELSE 'pending' END,
                run_at = CASE WHEN c.parents_left > d.done THEN c.run_at
                              ELSE GREATEST(c.run_at, now()) END,
                finished_at = CASE WHEN c.parents_left <= d.done AND c.run_if = 'failed'
                                        AND c.parents_failed + d.failed = 0 THEN now() END,
                -- A child still waiting keeps its timestamps: no column of an index
                -- changes, and the update stays on its page (HOT).
                updated_at = CASE WHEN c.parents_left > d.done THEN c.updated_at
                                  ELSE now() END
            FROM counts AS d
            -- Naming "locked" makes it run, before this scan: an uncorrelated subquery.
            WHERE c.id = d.id AND c.status = 'blocked' AND d.done > 0
              AND (SELECT count(*) FROM locked) >= 0
            RETURNING c.id, c.queue, c.status
        )
        SELECT count(*) FROM (
            SELECT pg_notify($2 || '_jobs', '* ' || queue)
            FROM (SELECT DISTINCT queue FROM released WHERE status = 'pending') AS q
            UNION ALL
            SELECT pg_notify($2 || '_done', string_agg(id::text, ','))
            FROM released WHERE status = 'cancelled' GROUP BY id / 300
        ) AS n
        $q$ USING ended, TG_TABLE_SCHEMA;
    END IF;

    IF failed IS NOT NULL THEN
        EXECUTE $q$
        WITH RECURSIVE doomed(id, root, cause, cause_status) AS (
            SELECT c.id, COALESCE(x.cancelled_by, x.id), x.id, x.status
            FROM {schema}.jobs AS x
            JOIN {schema}.workflow_edges AS e ON e.parent_id = x.id
            JOIN {schema}.jobs AS c ON c.id = e.child_id
            WHERE x.id = ANY($1) AND c.status = 'blocked' AND c.run_if = 'completed'
            UNION
            SELECT c.id, d.root, d.cause, d.cause_status
            FROM doomed AS d
            JOIN {schema}.jobs AS p ON p.id = d.id
            JOIN {schema}.workflow_edges AS e ON e.parent_id = d.id
            JOIN {schema}.jobs AS c ON c.id = e.child_id
            WHERE p.on_failure = 'cancel' AND c.status = 'blocked' AND c.run_if = 'completed'
        ), chosen AS (
            SELECT DISTINCT ON (id) id, root, cause, cause_status FROM doomed ORDER BY id, root
        ), cancelled AS (
            UPDATE {schema}.jobs AS c
            SET status = 'cancelled',
                cancelled_by = d.root,
                last_error = 'not run: job ' || d.cause || ' ended ' || d.cause_status,
                finished_at = now(),
                updated_at = now()
            FROM chosen AS d
            WHERE c.id = d.id AND c.status = 'blocked'
            RETURNING c.id
        )
        SELECT count(*) FROM (
            SELECT pg_notify($2 || '_done', string_agg(id::text, ','))
            FROM cancelled GROUP BY id / 300
        ) AS n
        $q$ USING failed, TG_TABLE_SCHEMA;
    END IF;

    IF retried IS NOT NULL THEN
        EXECUTE $q$
        WITH waiting AS (
            SELECT e.child_id AS id, count(*)::integer AS n
            FROM {schema}.workflow_edges AS e
            WHERE e.parent_id = ANY($1)
            GROUP BY e.child_id
        ), rewaited AS (
            -- Children that had counted a retried job as done wait for it again...
            UPDATE {schema}.jobs AS c
            SET parents_left = c.parents_left + w.n,
                parents_failed = GREATEST(c.parents_failed - w.n, 0)
            FROM waiting AS w
            WHERE c.id = w.id AND c.status = 'blocked' AND c.cancelled_by IS NULL
              AND c.parents_failed > 0
        )
        -- ...and what its failure cancelled is blocked again, each job waiting for its
        -- parents that have not completed (the retried one, or one resumed here).
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
        WHERE c.workflow_id IN (SELECT workflow_id FROM {schema}.jobs WHERE id = ANY($1))
          AND c.cancelled_by = ANY($1)
          AND c.status = 'cancelled'
        $q$ USING retried;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_workflow_step
    AFTER UPDATE ON {schema}.jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH ROW
    WHEN (NEW.workflow_id IS NOT NULL AND OLD.status IS DISTINCT FROM NEW.status
          AND (NEW.status IN ('completed', 'failed', 'cancelled')
               OR OLD.status IN ('failed', 'cancelled')))
    EXECUTE FUNCTION {schema}.workflow_step();

REVOKE EXECUTE ON FUNCTION {schema}.workflow_step() FROM PUBLIC;
