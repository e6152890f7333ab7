-- The oids of the schema's tables, indexes and sequences, none before it exists
-- (migration_locks.sql tells locks on these from locks on relations a migration made).
SELECT array_agg(oid) FROM pg_class WHERE relnamespace = to_regnamespace($1)
