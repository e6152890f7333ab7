CREATE TABLE IF NOT EXISTS {schema}.jobqueue_migrations (
    version    integer PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
