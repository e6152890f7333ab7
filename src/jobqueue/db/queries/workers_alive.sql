-- How many worker processes heartbeated within the last $1 seconds (the metrics'
-- jobqueue_workers_heartbeating, read by the maintenance leader).
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
SELECT count(*)::int FROM {schema}.workers
WHERE heartbeat_at >= COALESCE($2::timestamptz, now()) - make_interval(secs => $1)
