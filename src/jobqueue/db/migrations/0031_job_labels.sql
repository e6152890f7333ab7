-- The search's indexes move off the jobs table (docs/search.md). A claim and a
-- completion are UPDATEs that cannot be HOT (they change the indexed status), so each
-- adds an entry for the row's new version to every index of jobs: a job with tags and
-- metadata wrote its GIN entries three times (enqueue, claim, completion), and a drain
-- of such jobs ran at 0.73x the rate of one without (bench workload drain_1proc_tagged).
--
-- The tags and metadata stay on jobs: what a claim hands a handler, what a job shows.
-- A copy of them lives in job_labels, indexed there. A job with neither has no row.
-- The statements that insert jobs write the copy themselves, in the same statement
-- (enqueue.sql, enqueue_rows.sql, enqueue_payloads.sql, workflow_insert_jobs.sql and
-- the unique enqueues below): a trigger per inserted row cost 15 us of server time per
-- tagged job, five times the copy's own insert, and a tagged enqueue ran at 0.68x the
-- rate of one without. Triggers keep the copy when the two columns change (PATCH, a
-- replacing unique enqueue), and delete it with the job. A claim or a completion does
-- not name the two columns, and fires none of them.
CREATE TABLE {schema}.job_labels (
    job_id bigint PRIMARY KEY,
    tags text[],
    meta jsonb
);
-- One GIN index of both columns, which serves a condition on either: each copy
-- inserted is one entry in its list of pending entries, not one in each of two indexes
-- (130 bytes of WAL less per tagged job). jsonb_path_ops indexes each path to a value
-- as one hash: a third of the size of the default opclass, and containment
-- (meta @> '{"customer": "acme"}') is the one operator the search uses on it.
CREATE INDEX job_labels_idx ON {schema}.job_labels USING gin (tags, meta jsonb_path_ops);

INSERT INTO {schema}.job_labels (job_id, tags, meta)
SELECT id, tags, meta FROM {schema}.jobs WHERE tags IS NOT NULL OR meta IS NOT NULL;

-- Run as the owner (migration 0016 says why): no role needs more than INSERT on
-- job_labels to write jobs.
CREATE FUNCTION {schema}.copy_job_labels() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'DELETE' OR (NEW.tags IS NULL AND NEW.meta IS NULL) THEN
        DELETE FROM {schema}.job_labels WHERE job_id = OLD.id;
    ELSE
        INSERT INTO {schema}.job_labels AS l (job_id, tags, meta)
        VALUES (NEW.id, NEW.tags, NEW.meta)
        ON CONFLICT (job_id) DO UPDATE SET tags = excluded.tags, meta = excluded.meta;
    END IF;
    RETURN NULL;
END;
$$;

CREATE FUNCTION {schema}.copy_job_labels_truncated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    TRUNCATE {schema}.job_labels;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_labels_changed
    AFTER UPDATE OF tags, meta ON {schema}.jobs
    FOR EACH ROW WHEN (OLD.tags IS DISTINCT FROM NEW.tags OR OLD.meta IS DISTINCT FROM NEW.meta)
    EXECUTE FUNCTION {schema}.copy_job_labels();

CREATE TRIGGER jobs_labels_deleted
    AFTER DELETE ON {schema}.jobs
    FOR EACH ROW WHEN (OLD.tags IS NOT NULL OR OLD.meta IS NOT NULL)
    EXECUTE FUNCTION {schema}.copy_job_labels();

CREATE TRIGGER jobs_labels_truncated
    AFTER TRUNCATE ON {schema}.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.copy_job_labels_truncated();

DROP INDEX {schema}.jobs_tags_idx;
DROP INDEX {schema}.jobs_meta_idx;

-- The roles that insert jobs insert their copies, and those that may read and delete
-- every job (an api or worker role, `jobqueue grants`) read the copies; an enqueue
-- role reads only the rows it inserts (migration 0016's policy), and no copy.
DO $$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN
        SELECT a.grantee::regrole::text
        FROM pg_class AS t, aclexplode(t.relacl) AS a
        WHERE t.oid = '{schema}.jobs'::regclass AND a.privilege_type = 'INSERT'
          AND a.grantee <> 0 AND a.grantee <> t.relowner
        UNION
        SELECT a.grantee::regrole::text
        FROM pg_attribute AS c, aclexplode(c.attacl) AS a
        WHERE c.attrelid = '{schema}.jobs'::regclass AND c.attname = 'type'
          AND a.privilege_type = 'INSERT' AND a.grantee <> 0
    LOOP
        EXECUTE format('GRANT INSERT ON {schema}.job_labels TO %s', grantee);
    END LOOP;
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole::text
        FROM pg_class AS t, aclexplode(t.relacl) AS a
        WHERE t.oid = '{schema}.jobs'::regclass AND a.privilege_type = 'DELETE'
          AND a.grantee <> 0 AND a.grantee <> t.relowner
    LOOP
        EXECUTE format('GRANT SELECT ON {schema}.job_labels TO %s', grantee);
    END LOOP;
END;
$$;
