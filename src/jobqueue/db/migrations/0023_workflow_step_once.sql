-- Workflow release (migration 0019) with one plpgsql call per statement instead of one
-- per ended job, and plans kept instead of made on every call (docs/workflows.md, "How
-- it works, and what it costs").
--
-- 0019's trigger was called for every ended workflow job: its first call did the
-- statement's work and each later one only counted itself down (1,250 calls for a
-- batch of 1,250 completions), and its queries were planned on every call (EXECUTE),
-- 0.35 ms of a chain's hop. Here the trigger's WHEN clause lets through only the first
-- such row of each statement, so that the function runs once per statement and the
-- other rows cost an expression each; and the common statements (one job ended, or a
-- batch whose children count alike) run queries whose plans are kept.

-- What one statement's changes of workflow jobs do to their children, in that
-- statement's transaction, as 0019's workflow_step says (completed, failed or cancelled,
-- retried). The rows come from the statement's transition tables: the jobs that ended in
-- it, by how (completed; failed or cancelled with on_failure continue; failed or
-- cancelled otherwise, of which those whose on_failure is cancel doom their subtree),
-- and those that came back from failed or cancelled to pending (a manual retry).
--
-- Plans are kept, made for no particular array (force_generic_plan: a plan made for a
-- chain's single parent looks cheaper than a generic one, so the default would plan
-- every call), and none of them joins a set of children with the jobs table: each
-- child is found by the primary key (= ANY), so that no plan, whatever the number of
-- rows it was made for, can make it a scan of the table, and the cost follows the
-- children counted. The cancel cascade and the retry, rare and of any size, are planned
-- for the rows at hand (EXECUTE), as in 0019; so is telling which rows ended here when
-- some had ended before the statement.
--
-- It runs as whoever changed the jobs (the roles that change jobs may read the edges,
-- db/grants.py). Every name in it is schema-qualified or pg_catalog's.
CREATE OR REPLACE FUNCTION {schema}.workflow_step() RETURNS trigger
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    completed bigint[];
    continued bigint[];
    stopped bigint[];
    doomed bigint[];
    retried bigint[];
    earlier bigint[];  -- workflow jobs of the statement that had ended before it
    ended integer;
    parent bigint;
    counted record;
    notified bigint;
BEGIN
    SELECT array_agg(n.id) FILTER (WHERE n.status = 'completed'),
           array_agg(n.id) FILTER (WHERE n.status IN ('failed', 'cancelled')
                                     AND n.on_failure = 'continue'),
           array_agg(n.id) FILTER (WHERE n.status IN ('failed', 'cancelled')
                                     AND n.on_failure IS DISTINCT FROM 'continue'),
           array_agg(n.id) FILTER (WHERE n.status IN ('failed', 'cancelled')
                                     AND n.on_failure = 'cancel'),
           (SELECT array_agg(o.id) FROM old_rows AS o
            WHERE o.workflow_id IS NOT NULL AND o.status IN ('completed', 'failed', 'cancelled'))
    INTO completed, continued, stopped, doomed, earlier
    FROM new_rows AS n
    WHERE n.workflow_id IS NOT NULL AND n.status IN ('completed', 'failed', 'cancelled');

    IF earlier IS NOT NULL THEN
        -- Jobs that had ended, changed again (retried, or rewritten by hand): each new
        -- row against its old one, planned for the rows at hand.
        EXECUTE $q$
            SELECT array_agg(n.id) FILTER (WHERE n.status = 'completed' AND o.status NOT IN
                                                   ('completed', 'failed', 'cancelled')),
                   array_agg(n.id) FILTER (WHERE n.status IN ('failed', 'cancelled')
                                             AND o.status NOT IN ('completed', 'failed', 'cancelled')
                                             AND n.on_failure = 'continue'),
                   array_agg(n.id) FILTER (WHERE n.status IN ('failed', 'cancelled')
                                             AND o.status NOT IN ('completed', 'failed', 'cancelled')
                                             AND n.on_failure IS DISTINCT FROM 'continue'),
                   array_agg(n.id) FILTER (WHERE n.status IN ('failed', 'cancelled')
                                             AND o.status NOT IN ('completed', 'failed', 'cancelled')
                                             AND n.on_failure = 'cancel'),
                   array_agg(n.id) FILTER (WHERE n.status = 'pending'
                                             AND o.status IN ('failed', 'cancelled'))
            FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
            WHERE n.workflow_id IS NOT NULL
        $q$ INTO completed, continued, stopped, doomed, retried;
    END IF;

    ended := COALESCE(cardinality(completed), 0) + COALESCE(cardinality(continued), 0)
             + COALESCE(cardinality(stopped), 0);
    IF ended = 1 THEN
        -- One job ended (a chain's hop, a fan-out's parent): each of its children counts
        -- it once. "ok": whatever the child's run_if (it completed, or failed and
        -- continues); otherwise only a child that runs whatever counts it.
        parent := COALESCE(completed[1], continued[1], stopped[1]);
        WITH locked AS (
            -- A child that waits for another parent still may meet that parent's
            -- transaction: those are locked first, in id order, so that two such
            -- transactions queue instead of deadlocking. A child at its last parent (a
            -- fan-out's, a chain's next job) has no other writer to meet.
            SELECT j.id FROM {schema}.jobs AS j
            WHERE j.id = ANY(ARRAY(SELECT e.child_id FROM {schema}.workflow_edges AS e
                                   WHERE e.parent_id = parent))
              AND j.status = 'blocked' AND j.parents_left > 1
            ORDER BY j.id
            FOR UPDATE
        ), released AS (
            UPDATE {schema}.jobs AS c
            SET parents_left = c.parents_left - 1,
                parents_failed = c.parents_failed + (completed IS NULL)::integer,
                status = CASE
                    WHEN c.parents_left > 1 THEN 'blocked'
                    WHEN c.run_if = 'failed' AND c.parents_failed = 0 AND completed IS NOT NULL
                        THEN 'cancelled'
                    ELSE 'pending' END,
                run_at = CASE WHEN c.parents_left > 1 THEN c.run_at
                              ELSE GREATEST(c.run_at, now()) END,
                finished_at = CASE WHEN c.parents_left <= 1 AND c.run_if = 'failed'
                                        AND c.parents_failed = 0 AND completed IS NOT NULL
                                   THEN now() END,
                -- A child still waiting keeps its timestamps: no column of an index
                -- changes, and the update stays on its page (HOT).
                updated_at = CASE WHEN c.parents_left > 1 THEN c.updated_at ELSE now() END
            WHERE c.id = ANY(ARRAY(SELECT e.child_id FROM {schema}.workflow_edges AS e
                                   WHERE e.parent_id = parent))
              AND c.status = 'blocked'
              AND (stopped IS NULL OR c.run_if IN ('finished', 'failed'))
              -- Naming "locked" makes it run, before this scan: an uncorrelated subquery.
              AND (SELECT count(*) FROM locked) >= 0
            RETURNING c.id, c.queue, c.status
        )
        -- Released children are announced as "* <queue>" (migration 0011); children it
        -- ends (run_if failed, and every parent completed), on the done channel.
        SELECT count(*) INTO notified FROM (
            SELECT pg_notify({channel}, '* ' || queue)
            FROM (SELECT DISTINCT queue FROM released WHERE status = 'pending') AS q
            UNION ALL
            SELECT pg_notify({done_channel}, string_agg(id::text, ','))
            FROM released WHERE status = 'cancelled' GROUP BY id / 300
        ) AS n;
    ELSIF ended > 1 THEN
        -- Several ended (a batch of completions): per child, its parents that ended
        -- here that it counts whatever its run_if ("ok") and all of them ("ended"),
        -- with how many of each did not complete; children that count alike are
        -- updated together. A batch makes few groups: the children of a batch of chains,
        -- or of a fan-out's parents, or a chord's callback, are one group each.
        FOR counted IN
            SELECT array_agg(x.id) AS ids, x.ok, x.ok_failed, x.ended, x.ended_failed
            FROM (SELECT e.child_id AS id,
                         (count(*) FILTER (WHERE e.how < 2))::integer AS ok,
                         (count(*) FILTER (WHERE e.how = 1))::integer AS ok_failed,
                         count(*)::integer AS ended,
                         (count(*) FILTER (WHERE e.how > 0))::integer AS ended_failed
                  FROM (SELECT e.child_id, 0 AS how FROM {schema}.workflow_edges AS e
                        WHERE e.parent_id = ANY(completed)
                        UNION ALL
                        SELECT e.child_id, 1 FROM {schema}.workflow_edges AS e
                        WHERE e.parent_id = ANY(continued)
                        UNION ALL
                        SELECT e.child_id, 2 FROM {schema}.workflow_edges AS e
                        WHERE e.parent_id = ANY(stopped)) AS e
                  GROUP BY e.child_id) AS x
            GROUP BY x.ok, x.ok_failed, x.ended, x.ended_failed
        LOOP
            WITH locked AS (
                -- As above, for the children that may still wait for another parent.
                SELECT j.id FROM {schema}.jobs AS j
                WHERE j.id = ANY(counted.ids) AND j.status = 'blocked'
                  AND j.parents_left > counted.ok
                ORDER BY j.id
                FOR UPDATE
            ), released AS (
                UPDATE {schema}.jobs AS c
                SET parents_left = c.parents_left - CASE WHEN c.run_if IN ('finished', 'failed')
                                                         THEN counted.ended ELSE counted.ok END,
                    parents_failed = c.parents_failed
                        + CASE WHEN c.run_if IN ('finished', 'failed') THEN counted.ended_failed
                               ELSE counted.ok_failed END,
                    status = CASE
                        WHEN c.parents_left > CASE WHEN c.run_if IN ('finished', 'failed')
                                                   THEN counted.ended ELSE counted.ok END
                            THEN 'blocked'
                        WHEN c.run_if = 'failed' AND c.parents_failed + counted.ended_failed = 0
                            THEN 'cancelled'
                        ELSE 'pending' END,
                    run_at = CASE
                        WHEN c.parents_left > CASE WHEN c.run_if IN ('finished', 'failed')
                                                   THEN counted.ended ELSE counted.ok END
                            THEN c.run_at
                        ELSE GREATEST(c.run_at, now()) END,
                    finished_at = CASE
                        WHEN c.run_if = 'failed' AND c.parents_left <= counted.ended
                             AND c.parents_failed + counted.ended_failed = 0
                            THEN now() END,
                    updated_at = CASE
                        WHEN c.parents_left > CASE WHEN c.run_if IN ('finished', 'failed')
                                                   THEN counted.ended ELSE counted.ok END
                            THEN c.updated_at
                        ELSE now() END
                WHERE c.id = ANY(counted.ids) AND c.status = 'blocked'
                  AND CASE WHEN c.run_if IN ('finished', 'failed')
                           THEN counted.ended ELSE counted.ok END > 0
                  AND (SELECT count(*) FROM locked) >= 0
                RETURNING c.id, c.queue, c.status
            )
            SELECT count(*) INTO notified FROM (
                SELECT pg_notify({channel}, '* ' || queue)
                FROM (SELECT DISTINCT queue FROM released WHERE status = 'pending') AS q
                UNION ALL
                SELECT pg_notify({done_channel}, string_agg(id::text, ','))
                FROM released WHERE status = 'cancelled' GROUP BY id / 300
            ) AS n;
        END LOOP;
    END IF;

    IF doomed IS NOT NULL THEN
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
            SELECT pg_notify({done_channel}, string_agg(id::text, ','))
            FROM cancelled GROUP BY id / 300
        ) AS n
        $q$ USING doomed;
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

-- The first row of a statement that ends a workflow job (or brings one back from failed
-- or cancelled) calls the function, which does the work for all of the statement's rows
-- (its transition tables); the WHEN clause lets no other row of that statement through.
-- A statement is told by its new rows' cmin, its command id: each statement that
-- changes rows has one of its own in its transaction, a statement run by this function
-- included; the first row writes it to a setting local to the transaction, where a later
-- row of the same statement finds it. The clause is evaluated in order, and a row
-- outside workflows stops at its first test; it is made ready once per statement on
-- jobs, whatever the statement, so it calls only built-in functions (a polymorphic
-- "||" would be a SQL function, planned for every statement: 30 us a claim).
DROP TRIGGER jobs_workflow_step ON {schema}.jobs;
CREATE TRIGGER jobs_workflow_step
    AFTER UPDATE ON {schema}.jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH ROW
    WHEN (NEW.workflow_id IS NOT NULL AND OLD.status IS DISTINCT FROM NEW.status
          AND (NEW.status IN ('completed', 'failed', 'cancelled')
               OR OLD.status IN ('failed', 'cancelled'))
          AND current_setting('jobqueue.workflow_step', true) IS DISTINCT FROM NEW.cmin::text
          AND set_config('jobqueue.workflow_step', NEW.cmin::text, true) IS NOT NULL)
    EXECUTE FUNCTION {schema}.workflow_step();
