-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
UPDATE {schema}.workers SET heartbeat_at = COALESCE($2::timestamptz, now()) WHERE id = $1
