-- Worker processes announce themselves here and renew the row with their heartbeat,
-- so that operators can see who runs what, and since when.
CREATE TABLE {schema}.workers (
    id           text PRIMARY KEY,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    queues       text[]      NOT NULL,
    slots        integer     NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- The maintenance leader: one row, held while renewed. A lease rather than an
-- advisory lock, because a frozen process keeps its session (and a lock) alive.
CREATE TABLE {schema}.leader (
    name       text PRIMARY KEY,
    leader_id  text        NOT NULL,
    expires_at timestamptz NOT NULL
);
