-- The triggers that every UPDATE of jobs fires, made cheap for the updates they do not
-- concern: a claim or a completion of a job outside workflows, spawned children and
-- unique keys, which is nearly all of them.
--
-- A row trigger's WHEN clause is stored as the text of its expression tree, and
-- PostgreSQL reads that text back and prepares it once for every statement that
-- updates a row, whatever the rows. The clauses of the workflows' and the spawned
-- children's triggers (migrations 0023 and 0035) were 3,948 and 5,066 characters of
-- it: about 0.03 ms of server time on a one-job claim, and again on its completion.
-- Their tests of the statuses and of the setting that lets one row a statement through
-- now live in functions, called only for rows that pass the first, inline tests (a
-- workflow job, a spawned job or a parent whose status changed), so each clause is a
-- third of its length and a row outside them is still stopped by a column test.
--
-- The unique keys' trigger (0006, 0033) was a statement trigger: on every UPDATE of
-- jobs it ran its function, and the function its join of the new rows with the keys,
-- for rows that mostly had no key, or whose key a claim (pending to running) keeps held
-- all the same. It is now a row trigger of the same kind as the workflows': it fires
-- for a row with a key whose status moved between held (blocked, pending, running,
-- waiting) and ended, or from one ended status to another, and its first call in a
-- statement does the work for all of the statement's rows, as before.
--
-- Every test is the one the clause made before, in the same order; a row that passed
-- one clause before passes it now. The functions run as whoever updates jobs and call
-- only built-in functions; the settings they write are local to the transaction.
--
-- CREATE OR REPLACE TRIGGER (PostgreSQL 14 on) holds a ShareRowExclusiveLock on jobs,
-- which blocks writes, not reads, for the milliseconds until this commits; DROP TRIGGER
-- would hold an AccessExclusiveLock, which blocks both.

CREATE FUNCTION {schema}.workflow_step_due(old_status text, new_status text, command cid)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RETURN (new_status IN ('completed', 'failed', 'cancelled')
            OR old_status IN ('failed', 'cancelled'))
       AND current_setting('jobqueue.workflow_step', true) IS DISTINCT FROM command::text
       AND set_config('jobqueue.workflow_step', command::text, true) IS NOT NULL;
END;
$$;

CREATE FUNCTION {schema}.spawn_step_due(
    spawned boolean, parent boolean, old_status text, new_status text, command cid
) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RETURN ((spawned AND new_status IN ('completed', 'failed', 'cancelled'))
            OR (parent AND old_status NOT IN ('completed', 'failed', 'cancelled')
                AND new_status IN ('failed', 'cancelled')))
       AND current_setting('jobqueue.spawn_step', true) IS DISTINCT FROM command::text
       AND set_config('jobqueue.spawn_step', command::text, true) IS NOT NULL;
END;
$$;

-- A key stays 'infinity' while its job is held; release_unique_keys sets it from the
-- new status, so a change within the held statuses has nothing to write.
CREATE FUNCTION {schema}.unique_keys_due(old_status text, new_status text, command cid)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RETURN NOT (old_status IN ('blocked', 'pending', 'running', 'waiting')
                AND new_status IN ('blocked', 'pending', 'running', 'waiting'))
       AND current_setting('jobqueue.unique_keys', true) IS DISTINCT FROM command::text
       AND set_config('jobqueue.unique_keys', command::text, true) IS NOT NULL;
END;
$$;

CREATE OR REPLACE TRIGGER jobs_workflow_step
    AFTER UPDATE ON {schema}.jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH ROW
    WHEN (NEW.workflow_id IS NOT NULL AND OLD.status IS DISTINCT FROM NEW.status
          AND {schema}.workflow_step_due(OLD.status, NEW.status, NEW.cmin))
    EXECUTE FUNCTION {schema}.workflow_step();

CREATE OR REPLACE TRIGGER jobs_spawn_step
    AFTER UPDATE ON {schema}.jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH ROW
    WHEN ((NEW.spawned_by IS NOT NULL OR NEW.children_left IS NOT NULL)
          AND OLD.status IS DISTINCT FROM NEW.status
          AND {schema}.spawn_step_due(NEW.spawned_by IS NOT NULL, NEW.children_left IS NOT NULL,
                                      OLD.status, NEW.status, NEW.cmin))
    EXECUTE FUNCTION {schema}.spawn_step();

CREATE OR REPLACE TRIGGER jobs_unique_keys
    AFTER UPDATE ON {schema}.jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH ROW
    WHEN (NEW.unique_key IS NOT NULL AND OLD.status IS DISTINCT FROM NEW.status
          AND {schema}.unique_keys_due(OLD.status, NEW.status, NEW.cmin))
    EXECUTE FUNCTION {schema}.release_unique_keys();
