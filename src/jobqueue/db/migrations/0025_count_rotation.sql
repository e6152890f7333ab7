-- The counters' changes (migration 0009) in two tables that take turns, so that their
-- size comes back to their live data while jobs keep running.
--
-- The leader folds the changes as they come, but while a long transaction elsewhere
-- holds the cluster's xmin back, the folded rows' dead versions stay, and the table
-- grows. Once the xmin moves on, vacuum frees those pages; but under continuous load
-- new rows land on them as they are freed, spread over the whole file, and the table
-- keeps its grown size for good: vacuum can only cut empty pages off its end. (Measured
-- at 200 jobs/s and a held xmin of 120 s: 3.9 MB for 290 live rows, after VACUUM.)
--
-- So the writers insert into one of two partitions, chosen by the time of their
-- transaction in turns of five seconds (queue_count_slot), and the leader empties the
-- other one with TRUNCATE once the fold has taken all its rows (queue_counts_rotate):
-- a TRUNCATE gives the file back whatever xmin is held, as PgQ rotates its event
-- tables. Readers and the fold go through the parent, as before, so neither sees the
-- turns. (A TRUNCATE is not MVCC-safe: a snapshot older than it that had not yet read
-- the partition would find it empty. Every read of the counts is one statement in
-- READ COMMITTED, whose snapshot is taken after its locks, so none is that old.)

-- Writers that started before this point wrote into the old table, which is copied
-- below; those that wait here write into the new one once we commit.
LOCK TABLE {schema}.jobs IN SHARE ROW EXCLUSIVE MODE;

-- The turn that a transaction starting at `at` writes into. Five seconds: a partition
-- holds at most about a turn's changes (the leader folds them every round, 5 s by
-- default, but vacuum seldom comes within seconds), and few transactions outlive one.
CREATE FUNCTION {schema}.queue_count_turn() RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 5::double precision $$;

CREATE FUNCTION {schema}.queue_count_slot(at timestamptz) RETURNS smallint
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT (floor(date_part('epoch', at) / {schema}.queue_count_turn())::bigint % 2)::smallint $$;

ALTER TABLE {schema}.queue_count_changes RENAME TO queue_count_changes_unrotated;

CREATE TABLE {schema}.queue_count_changes (
    queue     text        NOT NULL,
    pending   bigint      NOT NULL DEFAULT 0,
    running   bigint      NOT NULL DEFAULT 0,
    completed bigint      NOT NULL DEFAULT 0,
    failed    bigint      NOT NULL DEFAULT 0,
    cancelled bigint      NOT NULL DEFAULT 0,
    at        timestamptz NOT NULL DEFAULT now(),
    slot      smallint    NOT NULL DEFAULT {schema}.queue_count_slot(now())
) PARTITION BY LIST (slot);

-- As 0009's table: no index, and vacuumed after 1,000 folded rows whatever its size.
CREATE TABLE {schema}.queue_count_changes_0 PARTITION OF {schema}.queue_count_changes
    FOR VALUES IN (0)
    WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
CREATE TABLE {schema}.queue_count_changes_1 PARTITION OF {schema}.queue_count_changes
    FOR VALUES IN (1)
    WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);

INSERT INTO {schema}.queue_count_changes (queue, pending, running, completed, failed, cancelled, at)
SELECT queue, pending, running, completed, failed, cancelled, at
FROM {schema}.queue_count_changes_unrotated;

-- Empties the partition that is not taking this turn's writes, if it holds more than
-- `min_pages` pages and no rows: the fold, run just before, has taken them all, so
-- a row still there is a late writer's, and waits for the next round. NOWAIT: a
-- reader or a late writer holding the partition makes this round skip it, rather
-- than queue every other reader behind a lock. As the owner, so that the worker's
-- role needs no TRUNCATE.
--
-- Returns the seconds left in this turn if the partition taking its writes has grown
-- past `min_pages` too, else NULL: the leader comes back once that turn is over
-- (maintenance/compaction.py), since its rounds may keep falling in the same turn.
CREATE FUNCTION {schema}.queue_counts_rotate(min_pages integer) RETURNS double precision
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    seconds double precision := date_part('epoch', now());
    turn double precision := {schema}.queue_count_turn();
    current regclass := CASE {schema}.queue_count_slot(now())
                        WHEN 0 THEN '{schema}.queue_count_changes_0'::regclass
                        ELSE '{schema}.queue_count_changes_1'::regclass END;
    idle regclass := CASE current
                     WHEN '{schema}.queue_count_changes_0'::regclass
                     THEN '{schema}.queue_count_changes_1'::regclass
                     ELSE '{schema}.queue_count_changes_0'::regclass END;
    most bigint := min_pages::bigint * current_setting('block_size')::bigint;
    left_over boolean;
BEGIN
    IF pg_relation_size(idle) > most THEN
        BEGIN
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE NOWAIT', idle);
            EXECUTE format('SELECT EXISTS (SELECT FROM %s)', idle) INTO left_over;
            IF NOT left_over THEN
                EXECUTE format('TRUNCATE %s', idle);
            END IF;
        EXCEPTION WHEN lock_not_available THEN
            NULL;  -- held: the next round
        END;
    END IF;
    IF pg_relation_size(current) > most THEN
        RETURN turn - (seconds - floor(seconds / turn) * turn);
    END IF;
    RETURN NULL;
END;
$$;

-- Only the leader's role calls it (`jobqueue grants --for worker`), as the owner.
REVOKE EXECUTE ON FUNCTION {schema}.queue_counts_rotate(integer) FROM PUBLIC;

-- What the database roles were granted on the old table (`jobqueue grants`), they keep;
-- and a role that could fold the changes (DELETE) may now empty a partition too.
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN
        SELECT a.privilege_type,
               CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END AS who
        FROM pg_class AS c
        CROSS JOIN LATERAL aclexplode(c.relacl) AS a
        LEFT JOIN pg_roles AS r ON r.oid = a.grantee
        WHERE c.oid = '{schema}.queue_count_changes_unrotated'::regclass
          AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON {schema}.queue_count_changes TO %s', g.privilege_type, g.who);
        IF g.privilege_type = 'DELETE' THEN
            EXECUTE format(
                'GRANT EXECUTE ON FUNCTION {schema}.queue_counts_rotate(integer) TO %s', g.who
            );
        END IF;
    END LOOP;
END;
$$;

DROP TABLE {schema}.queue_count_changes_unrotated;
