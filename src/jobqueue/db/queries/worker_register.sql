-- $6 is "now": NULL for the database's clock, a time for a test's (db/store.py).
-- $7: the job types the worker has handlers for; $8: whether it claims every type
-- (migration 0024).
INSERT INTO {schema}.workers (id, host, pid, queues, slots, types, any_type)
VALUES ($1, $2, $3, $4, $5, $7, $8)
ON CONFLICT (id) DO UPDATE
SET heartbeat_at = COALESCE($6::timestamptz, now()), types = $7, any_type = $8
