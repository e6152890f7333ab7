-- Forgets workers silent for longer than $1 seconds (they died without saying so).
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
DELETE FROM {schema}.workers
WHERE heartbeat_at < COALESCE($2::timestamptz, now()) - make_interval(secs => $1)
RETURNING id
