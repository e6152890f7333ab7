-- Job types declared ahead of any worker (`jobqueue types add`, docs/http-workers.md):
-- POST /jobs accepts a declared type with no handler here and no live worker that
-- announces it, so that enqueueing does not depend on a worker being up. A declared
-- payload_schema (JSON Schema) is what POST /jobs checks each payload of the type
-- against; NULL accepts any JSON object.
CREATE TABLE {schema}.job_types (
    name text PRIMARY KEY CHECK (name <> ''),
    payload_schema jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
