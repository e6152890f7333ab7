-- Whether any job is running, or pending and due: a testing drain() goes on while so.
-- $1 is "now": NULL for the database's clock, a time for a test's (db/store.py).
SELECT EXISTS (SELECT 1 FROM {schema}.jobs WHERE status = 'running')
    OR EXISTS (SELECT 1 FROM {schema}.jobs WHERE status = 'pending' AND run_at <= COALESCE($1::timestamptz, now()))
