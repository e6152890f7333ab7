-- Durable steps (docs/durable.md). What a handler did through ctx.step, one row per step
-- and job, so that a later attempt of the job returns the recorded result instead of
-- doing the step again. Each row is written by the attempt that holds the job, fenced
-- by its claim (step_record.sql); rows go with their job (ON DELETE CASCADE), as its
-- logs and attempts do.
CREATE TABLE {schema}.job_steps (
    job_id      bigint      NOT NULL REFERENCES {schema}.jobs (id) ON DELETE CASCADE,
    name        text        NOT NULL,
    attempt     integer     NOT NULL,
    result      jsonb,
    worker_id   text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, name)
);

-- The cursor a handler saved with ctx.checkpoint: a column of the job, so that the claim
-- hands it back with the job (ctx.last_checkpoint) and a handler that never saves one
-- costs no read. NULL for none, which takes no space in the row; a column with no
-- default rewrites nothing, at any size of the table.
ALTER TABLE {schema}.jobs ADD COLUMN checkpoint jsonb;
