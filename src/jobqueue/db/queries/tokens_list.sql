-- Every token, revoked ones too, with the hash of its secret: what an API process
-- checks requests against (reread every half second), and, without the hash, what
-- `jobqueue tokens list` shows. A few rows: no index needed.
SELECT key_id, name, secret_hash, scopes, queues, types, created_at, expires_at, revoked_at
FROM {schema}.api_tokens
ORDER BY created_at, key_id
