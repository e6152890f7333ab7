-- Folds up to $1 rows of queue_count_changes into queue_totals, in one statement, and
-- returns how many it folded. The rows are taken by partition and ctid (the table has
-- no index, and a ctid names a row only within its partition, migration 0025), the
-- oldest pages first as a sequential scan finds them; SKIP LOCKED lets two leaders
-- that overlap for a moment fold different rows, and a row is added to the totals only
-- by the statement that deleted it, so nothing is counted twice. The same statement
-- adds the jobs that completed or failed to the dashboard's minutes (migration 0018).
-- Both upserts go in the order of their keys: two folds that overlap would otherwise
-- lock the same totals (or minutes) rows in different orders, and deadlock.
WITH picked AS (
    SELECT tableoid, ctid FROM {schema}.queue_count_changes LIMIT $1 FOR UPDATE SKIP LOCKED
), taken AS (
    DELETE FROM {schema}.queue_count_changes AS c
    USING picked
    WHERE c.tableoid = picked.tableoid AND c.ctid = picked.ctid
    RETURNING c.queue, c.pending, c.running, c.completed, c.failed, c.cancelled, c.at
), counted AS (
    -- The jobs that completed or failed, by the minute of the statement that did it:
    -- a change counts up only where jobs reached that state (retention and retries
    -- count down, and belong to no minute's throughput).
    INSERT INTO {schema}.queue_minutes AS m (minute, queue, completed, failed)
    SELECT date_trunc('minute', at), queue, sum(greatest(completed, 0)), sum(greatest(failed, 0))
    FROM taken
    GROUP BY 1, 2
    HAVING sum(greatest(completed, 0)) + sum(greatest(failed, 0)) > 0
    ORDER BY 1, 2
    ON CONFLICT (minute, queue) DO UPDATE
    SET completed = m.completed + excluded.completed, failed = m.failed + excluded.failed
), added AS (
    INSERT INTO {schema}.queue_totals AS t (queue, pending, running, completed, failed, cancelled)
    SELECT queue, sum(pending), sum(running), sum(completed), sum(failed), sum(cancelled)
    FROM taken GROUP BY queue ORDER BY queue
    ON CONFLICT (queue) DO UPDATE
    SET pending = t.pending + excluded.pending,
        running = t.running + excluded.running,
        completed = t.completed + excluded.completed,
        failed = t.failed + excluded.failed,
        cancelled = t.cancelled + excluded.cancelled
    -- A queue whose rows sum to nothing costs no new version of its totals row.
    WHERE (excluded.pending, excluded.running, excluded.completed, excluded.failed,
           excluded.cancelled) <> (0, 0, 0, 0, 0)
)
SELECT count(*) FROM taken
