-- The migrations applied to the schema, oldest first, with when (jobqueue migrate
-- --status; a start without migrating compares the last with its own).
SELECT version, name, applied_at FROM {schema}.jobqueue_migrations ORDER BY version
