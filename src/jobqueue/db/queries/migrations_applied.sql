SELECT version FROM {schema}.jobqueue_migrations ORDER BY version
