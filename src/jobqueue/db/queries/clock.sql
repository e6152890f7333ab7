-- The database's clock, so that times compare with the rows' (jobqueue.testing).
-- $1 is "now": NULL for the database's clock, a time for a test's (db/store.py).
SELECT COALESCE($1::timestamptz, now())
