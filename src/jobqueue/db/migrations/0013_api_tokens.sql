-- API tokens (docs/security.md). A token is "jqt_<key_id>_<secret>": key_id finds the
-- row, and only the SHA-256 of the secret is kept, so neither a backup nor a reader of
-- this table can use a token. A revoked token keeps its row (and its name, for the
-- audit log); a new token may take the name of a revoked one.
CREATE TABLE {schema}.api_tokens (
    key_id      text PRIMARY KEY,
    name        text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}$'),
    secret_hash bytea NOT NULL,
    scopes      text[] NOT NULL CHECK (cardinality(scopes) > 0),
    queues      text[],  -- NULL: every queue
    types       text[],  -- NULL: every type
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz,
    revoked_at  timestamptz
);

CREATE UNIQUE INDEX api_tokens_name_idx ON {schema}.api_tokens (name) WHERE revoked_at IS NULL;
