-- Forgets up to $1 unique keys whose hold ended: retention of the keys table.
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
DELETE FROM {schema}.unique_keys
WHERE key = ANY(ARRAY(
    SELECT key FROM {schema}.unique_keys
    WHERE held_until <> 'infinity' AND held_until < COALESCE($2::timestamptz, now())
    ORDER BY held_until
    LIMIT $1
    FOR UPDATE SKIP LOCKED
))
