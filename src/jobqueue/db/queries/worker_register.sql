-- $6 is "now": NULL for the database's clock, a time for a test's (db/store.py).
INSERT INTO {schema}.workers (id, host, pid, queues, slots)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = COALESCE($6::timestamptz, now())
