-- Idempotency keys: the Idempotency-Key header of POST /jobs. A key names the job its
-- first request answered with, until expires_at, whatever becomes of that job: a
-- client retrying a request it never saw answered gets the same job back even once
-- it completed (unique_keys, migration 0006, frees a key when its job ends).
--
-- A key belongs to its caller: principal is the token's name, NULL while the API is
-- open, so two tokens choosing one key do not collide. request_hash is the SHA-256 of
-- the canonical request, to refuse the key's reuse for another request. job_id is set
-- in the transaction that takes the key, so a committed row always has one; no
-- foreign key: retention may delete the job before the key expires (the API then
-- answers 410, docs/http-api.md).
CREATE TABLE {schema}.idempotency_keys (
    principal    text,
    key          text        NOT NULL,
    request_hash bytea       NOT NULL,
    job_id       bigint,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);

-- COALESCE: NULL (the open API) is one caller, as a token's name is.
CREATE UNIQUE INDEX idempotency_keys_owner_key_idx
    ON {schema}.idempotency_keys ((COALESCE(principal, '')), key);

CREATE INDEX idempotency_keys_expiry_idx ON {schema}.idempotency_keys (expires_at);
