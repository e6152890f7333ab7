-- The search's indexes move off the jobs table (docs/search.md). A claim and a
-- completion are UPDATEs that cannot be HOT (they change the indexed status), so each
-- adds an entry for the row's new version to every index of jobs: a job with tags and
-- metadata wrote its GIN entries three times (enqueue, claim, completion), and a drain
-- of such jobs ran at 0.73x the rate of one without (bench workload drain_1proc_tagged).
--
-- The tags and metadata stay on jobs: what a claim hands a handler, what a job shows.
-- A copy of them lives in job_labels, indexed there. Triggers write it when a job is
-- inserted with tags or metadata or they change (PATCH, a replacing unique enqueue),
-- and delete it with the job, so that every path that writes jobs, this release's and
-- the one before's, keeps it whole. A claim or a completion does not name the two
-- columns, and fires none of them. A job with neither has no row here, and its
-- triggers' WHEN is false: nothing is queued for it.
CREATE TABLE {schema}.job_labels (
    job_id bigint PRIMARY KEY,
    tags text[],
    meta jsonb
);
CREATE INDEX job_labels_tags_idx ON {schema}.job_labels USING gin (tags)
    WHERE tags IS NOT NULL;
CREATE INDEX job_labels_meta_idx ON {schema}.job_labels USING gin (meta jsonb_path_ops)
    WHERE meta IS NOT NULL;

INSERT INTO {schema}.job_labels (job_id, tags, meta)
SELECT id, tags, meta FROM {schema}.jobs WHERE tags IS NOT NULL OR meta IS NOT NULL;

-- Run as the owner (migration 0016 says why): no role needs privileges on job_labels
-- to write jobs.
CREATE FUNCTION {schema}.copy_job_labels() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN  -- a new job's id is in no row (TRUNCATE empties both)
        INSERT INTO {schema}.job_labels (job_id, tags, meta) VALUES (NEW.id, NEW.tags, NEW.meta);
    ELSIF TG_OP = 'DELETE' OR (NEW.tags IS NULL AND NEW.meta IS NULL) THEN
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

CREATE TRIGGER jobs_labels_inserted
    AFTER INSERT ON {schema}.jobs
    FOR EACH ROW WHEN (NEW.tags IS NOT NULL OR NEW.meta IS NOT NULL)
    EXECUTE FUNCTION {schema}.copy_job_labels();

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
