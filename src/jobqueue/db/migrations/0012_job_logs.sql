-- What each attempt's handler logged (ctx.log, and stdlib logging when asked), kept
-- with the attempt: one row per attempt that logged anything, appended to as the
-- worker writes its batches (observability/joblogs.py). An attempt is its job, its
-- number and its claim time, because a manual retry numbers attempts from 1 again.
-- Rows go with their job (ON DELETE CASCADE): retention of jobs is retention of logs.
CREATE TABLE {schema}.job_logs (
    job_id     bigint      NOT NULL REFERENCES {schema}.jobs (id) ON DELETE CASCADE,
    attempt    integer     NOT NULL,
    started_at timestamptz NOT NULL,
    worker_id  text        NOT NULL,
    log        text        NOT NULL,
    truncated  boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (job_id, attempt, started_at)
);
