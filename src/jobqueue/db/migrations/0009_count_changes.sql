-- Queue counts that a long transaction cannot bloat.
--
-- The upserts of 0004 wrote a new version of two counter rows per statement. While
-- any session holds back the cluster's xmin (a transaction left idle, a long report,
-- a replica with hot_standby_feedback) no version can be pruned, HOT or not: the
-- rows' pages fill, every update then lands on a new page with a new index entry, and
-- the table stayed at its grown size after the xmin moved on, because the rows' live
-- versions sat on its last pages.
--
-- Now each statement only inserts what it changed: one row per queue it touched,
-- every state in that row. An insert leaves no dead version behind, and no writer
-- waits for another's row lock. The maintenance leader folds these rows into
-- queue_totals, one row per queue, in batches (maintenance/compaction.py), so dead
-- versions appear only there: a few per queue per leader round. Once the xmin is
-- released, vacuum empties the changes table's pages and gives them back to the
-- file system. Readers add both tables up in one snapshot, so the counts stay exact
-- whether or not a fold has committed.

-- Writers that started before this point counted into queue_counts; those that wait
-- here run the new trigger function once we commit.
LOCK TABLE {schema}.jobs IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE {schema}.queue_totals (
    queue     text   PRIMARY KEY,
    pending   bigint NOT NULL DEFAULT 0,
    running   bigint NOT NULL DEFAULT 0,
    completed bigint NOT NULL DEFAULT 0,
    failed    bigint NOT NULL DEFAULT 0,
    cancelled bigint NOT NULL DEFAULT 0
) WITH (fillfactor = 50);

-- No index: it is read whole (by the overview) or taken by ctid (by the fold), and an
-- index, unlike the heap, would not shrink back after a burst. Vacuum it after 1,000
-- folded rows whatever its size: it is small, and its dead rows are what readers skip.
CREATE TABLE {schema}.queue_count_changes (
    queue     text   NOT NULL,
    pending   bigint NOT NULL DEFAULT 0,
    running   bigint NOT NULL DEFAULT 0,
    completed bigint NOT NULL DEFAULT 0,
    failed    bigint NOT NULL DEFAULT 0,
    cancelled bigint NOT NULL DEFAULT 0
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);

INSERT INTO {schema}.queue_totals (queue, pending, running, completed, failed, cancelled)
SELECT queue,
       COALESCE(sum(n) FILTER (WHERE status = 'pending'), 0),
       COALESCE(sum(n) FILTER (WHERE status = 'running'), 0),
       COALESCE(sum(n) FILTER (WHERE status = 'completed'), 0),
       COALESCE(sum(n) FILTER (WHERE status = 'failed'), 0),
       COALESCE(sum(n) FILTER (WHERE status = 'cancelled'), 0)
FROM {schema}.queue_counts
GROUP BY queue;

-- One row per queue whose counts the statement changed; a heartbeat or a progress
-- report, which changes no state, writes nothing.
CREATE OR REPLACE FUNCTION {schema}.count_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO {schema}.queue_count_changes
            (queue, pending, running, completed, failed, cancelled)
        SELECT queue,
               count(*) FILTER (WHERE status = 'pending'),
               count(*) FILTER (WHERE status = 'running'),
               count(*) FILTER (WHERE status = 'completed'),
               count(*) FILTER (WHERE status = 'failed'),
               count(*) FILTER (WHERE status = 'cancelled')
        FROM new_rows GROUP BY queue;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO {schema}.queue_count_changes
            (queue, pending, running, completed, failed, cancelled)
        SELECT queue,
               -count(*) FILTER (WHERE status = 'pending'),
               -count(*) FILTER (WHERE status = 'running'),
               -count(*) FILTER (WHERE status = 'completed'),
               -count(*) FILTER (WHERE status = 'failed'),
               -count(*) FILTER (WHERE status = 'cancelled')
        FROM old_rows GROUP BY queue;
    ELSE
        INSERT INTO {schema}.queue_count_changes
            (queue, pending, running, completed, failed, cancelled)
        SELECT * FROM (
            SELECT queue,
                   COALESCE(sum(d) FILTER (WHERE status = 'pending'), 0) AS pending,
                   COALESCE(sum(d) FILTER (WHERE status = 'running'), 0) AS running,
                   COALESCE(sum(d) FILTER (WHERE status = 'completed'), 0) AS completed,
                   COALESCE(sum(d) FILTER (WHERE status = 'failed'), 0) AS failed,
                   COALESCE(sum(d) FILTER (WHERE status = 'cancelled'), 0) AS cancelled
            FROM (SELECT queue, status, 1 AS d FROM new_rows
                  UNION ALL
                  SELECT queue, status, -1 FROM old_rows) AS changes
            GROUP BY queue
        ) AS c
        WHERE (pending, running, completed, failed, cancelled) <> (0, 0, 0, 0, 0);
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION {schema}.count_jobs_truncated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE {schema}.queue_totals, {schema}.queue_count_changes;
    RETURN NULL;
END;
$$;

DROP TABLE {schema}.queue_counts;
