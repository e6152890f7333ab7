-- One step of priority aging, for at most $2 jobs: a due job that has waited $1
-- seconds since it was due, and $1 seconds since its last step, moves up one
-- priority (lower is better) while its queue has due jobs of a better priority.
-- It stops at the best priority waiting in its queue; among equal priorities the
-- oldest runs first. A queue whose jobs share one priority is never touched.
-- updated_at is the clock of the steps: nothing else changes a pending job.
-- A moved job can land before where a worker's claims resume (its run_at is old):
-- "* <queue>" tells the workers to look from the start (migration 0011).
-- $3 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH aged AS (
    UPDATE {schema}.jobs AS j
    SET priority = j.priority - 1, updated_at = COALESCE($3::timestamptz, now())
    WHERE j.id = ANY(ARRAY(
        SELECT c.id
        FROM {schema}.jobs AS c
        WHERE c.status = 'pending'
          AND c.run_at <= COALESCE($3::timestamptz, now()) - make_interval(secs => $1)
          AND c.updated_at <= COALESCE($3::timestamptz, now()) - make_interval(secs => $1)
          AND c.priority > (SELECT b.priority FROM {schema}.jobs AS b
                            WHERE b.status = 'pending' AND b.queue = c.queue AND b.run_at <= COALESCE($3::timestamptz, now())
                            ORDER BY b.priority LIMIT 1)
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    ))
    RETURNING j.queue
)
SELECT count(*) AS aged, count(pg_notify({channel}, '* ' || queue)) AS notified FROM aged
