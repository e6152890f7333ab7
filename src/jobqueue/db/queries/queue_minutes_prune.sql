-- Forgets the per-minute rows older than $1 seconds (the charts show a day at most).
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
DELETE FROM {schema}.queue_minutes
WHERE minute < COALESCE($2::timestamptz, now()) - make_interval(secs => $1)
