-- Every failed attempt of a job, kept with its error, so that a dead letter shows
-- how each attempt ended, not only the last. Rows go with their job (ON DELETE
-- CASCADE), so retention of jobs is retention of their history. A surrogate key,
-- because a manual retry starts the attempts again from 1.
CREATE TABLE {schema}.job_attempts (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      bigint      NOT NULL REFERENCES {schema}.jobs (id) ON DELETE CASCADE,
    attempt     integer     NOT NULL,
    worker_id   text,
    error       text        NOT NULL,
    traceback   text,
    started_at  timestamptz,
    finished_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX job_attempts_job_idx ON {schema}.job_attempts (job_id, id);
