-- Revokes the unrevoked token of this name; returns it, or nothing when there is none.
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
UPDATE {schema}.api_tokens
SET revoked_at = COALESCE($2::timestamptz, now())
WHERE name = $1 AND revoked_at IS NULL
RETURNING name, scopes, queues, types, created_at, expires_at, revoked_at
