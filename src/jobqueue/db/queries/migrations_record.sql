INSERT INTO {schema}.jobqueue_migrations (version, name) VALUES ($1, $2)
