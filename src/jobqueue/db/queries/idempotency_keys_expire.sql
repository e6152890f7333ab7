-- Forgets up to $1 idempotency keys past their expiry: retention of the keys table.
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
DELETE FROM {schema}.idempotency_keys
WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM {schema}.idempotency_keys
    WHERE expires_at <= COALESCE($2::timestamptz, now())
    ORDER BY expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
))
