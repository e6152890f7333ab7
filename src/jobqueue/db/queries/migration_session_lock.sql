-- Takes the migration lock of key $1 for this session if it is free (true), held until
-- released (migration_session_unlock.sql) or the session ends: for a migration outside
-- a transaction (CREATE INDEX CONCURRENTLY). It conflicts with the transactions' lock
-- of the same key (migration_lock.sql), so it serialises them all. Tried, not waited
-- for: a waiting statement would hold a snapshot, which a concurrent index build waits
-- out, while it waits for the builder's lock. Through PgBouncer in transaction mode,
-- only on a direct session (docs/migrations.md).
SELECT pg_try_advisory_lock($1)
