-- Whether some token can authenticate now (unrevoked, unexpired): beyond loopback,
-- `serve` and `api` start only if one does. Run before the migrations, so that the
-- start is decided before anything else is done: on a schema not yet made, it fails
-- (undefined table), which the caller reads as "none".
-- $1 is "now": NULL for the database's clock, a time for a test's (db/store.py).
SELECT EXISTS (
    SELECT FROM {schema}.api_tokens
    WHERE revoked_at IS NULL
      AND (expires_at IS NULL OR expires_at > COALESCE($1::timestamptz, now()))
)
