-- One control action: $1 actor, $2 action, $3 target, $4 filter (JSON text), $5 count,
-- $6 client address, $7 result. Returns the row's id (a bulk action adds to its count).
-- $8 is "now": NULL for the database's clock, a time for a test's (db/store.py).
INSERT INTO {schema}.audit_log (at, actor, action, target, filter, count, client, result)
VALUES (COALESCE($8::timestamptz, now()), $1, $2, $3, $4::jsonb, $5, $6, $7)
RETURNING id
