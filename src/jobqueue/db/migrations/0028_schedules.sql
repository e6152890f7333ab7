-- Schedules as data (docs/schedules.md): periodic jobs created, changed, paused and
-- deleted at run time, besides those declared in code, which the maintenance leader
-- writes here with source 'code'. Each row is one schedule: a cron expression in a
-- time zone, or an interval (every_seconds). next_run_at is its next tick; the leader
-- enqueues a due tick and moves next_run_at on in one transaction, under FOR UPDATE
-- SKIP LOCKED, so each tick is one job whatever the number of processes.
CREATE TABLE {schema}.schedules (
    name text PRIMARY KEY CHECK (name <> ''),
    type text NOT NULL CHECK (type <> ''),
    cron text,
    every_seconds integer CHECK (every_seconds >= 1),
    timezone text NOT NULL DEFAULT 'UTC',
    -- NULL: each job's payload is {"tick": "<the tick>"} (a schedule declared in code).
    payload jsonb,
    queue text,  -- NULL: the type's task's queue where the tick is enqueued, else default
    priority integer,
    missed text NOT NULL DEFAULT 'skip' CHECK (missed IN ('skip', 'once', 'all')),
    enabled boolean NOT NULL DEFAULT true,
    source text NOT NULL DEFAULT 'api' CHECK (source IN ('api', 'code')),
    next_run_at timestamptz NOT NULL,
    last_run_at timestamptz,  -- the last tick enqueued
    last_job_id bigint,  -- its job, or the last one triggered; not a foreign key: retention
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((cron IS NULL) <> (every_seconds IS NULL))
);

-- The leader's one query a second: the earliest enabled tick, and the due ones.
CREATE INDEX schedules_due_idx ON {schema}.schedules (next_run_at) WHERE enabled;
