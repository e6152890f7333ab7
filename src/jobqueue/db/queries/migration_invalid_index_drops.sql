-- A statement dropping each of the schema's invalid indexes: what a CREATE INDEX
-- CONCURRENTLY that died (or gave up) leaves behind, and IF NOT EXISTS would keep. A
-- migration outside a transaction runs them before it builds: no other build can be
-- running while it holds the migration lock. The names are quoted here (%I), as no
-- parameter can stand for an identifier.
SELECT format('DROP INDEX CONCURRENTLY IF EXISTS %I.%I', n.nspname, c.relname) AS statement
FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND NOT i.indisvalid
ORDER BY c.relname
