-- Takes idempotency key $2 of principal $1 (NULL: the open API) for a request whose
-- hash is $3, for $4 seconds; a row comes back if it was free or had expired. No row:
-- another request holds it (read it with idempotency_lookup.sql). Run in the
-- transaction that stores the job and binds it (idempotency_bind.sql): a concurrent
-- request with the key waits here on the row until that transaction ends.
-- $5 is "now": NULL for the database's clock, a time for a test's (db/store.py).
INSERT INTO {schema}.idempotency_keys AS k
    (principal, key, request_hash, created_at, expires_at)
VALUES ($1, $2, $3, COALESCE($5::timestamptz, now()),
        COALESCE($5::timestamptz, now()) + make_interval(secs => $4::float8))
ON CONFLICT ((COALESCE(principal, '')), key) DO UPDATE
    SET request_hash = excluded.request_hash, job_id = NULL,
        created_at = excluded.created_at, expires_at = excluded.expires_at
    WHERE k.expires_at <= COALESCE($5::timestamptz, now())
RETURNING true AS taken
