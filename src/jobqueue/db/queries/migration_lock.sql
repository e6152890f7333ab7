-- Waits for the migration lock of key $1, held until the transaction ends. A
-- transaction's lock, not a session's: it serialises concurrent starters just the same,
-- and holds through PgBouncer in transaction mode, which may hand each statement
-- outside a transaction to another server connection (the poll-only mode).
SELECT pg_advisory_xact_lock($1)
