-- Stores a new token; nothing when an unrevoked token already has the name.
-- $7 is "now": NULL for the database's clock, a time for a test's (db/store.py).
INSERT INTO {schema}.api_tokens (key_id, name, secret_hash, scopes, queues, types, expires_at, created_at)
VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7::timestamptz, now()) + make_interval(secs => $8),
        COALESCE($7::timestamptz, now()))
ON CONFLICT (name) WHERE revoked_at IS NULL DO NOTHING
RETURNING name, scopes, queues, types, created_at, expires_at, revoked_at
