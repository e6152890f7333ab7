-- Whether any job is running, or pending and due: a testing drain() goes on while so.
-- Each side is the first entry of a partial index (lease, claim), found by ORDER BY:
-- written as EXISTS, the ORDER BY is dropped and the planner may scan the table for
-- the first matching row, which with finished jobs kept ahead of it reads them all.
-- $1 is "now": NULL for the database's clock, a time for a test's (db/store.py). The
-- database's clock is read as the statement runs, not now(): now() is when the
-- statement's transaction began, before its snapshot was taken, and a retry due at
-- once, committed in between, would be seen pending but not yet due, and the drain
-- would end without running it. As an InitPlan it is read once, and the claim index
-- still serves the comparison.
SELECT (SELECT id FROM {schema}.jobs WHERE status = 'running'
        ORDER BY lease_expires_at LIMIT 1) IS NOT NULL
    OR (SELECT id FROM {schema}.jobs
        WHERE status = 'pending' AND run_at <= COALESCE($1::timestamptz, (SELECT clock_timestamp()))
        ORDER BY queue, priority, run_at, id LIMIT 1) IS NOT NULL
