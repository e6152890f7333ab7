-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
-- No row: the worker was silent long enough to be forgotten (workers_prune.sql), and
-- registers again, since its row is what says which types run (migration 0024).
UPDATE {schema}.workers SET heartbeat_at = COALESCE($2::timestamptz, now()) WHERE id = $1
RETURNING true
