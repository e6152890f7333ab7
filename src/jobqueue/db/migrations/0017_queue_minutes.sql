-- Per-minute throughput and wait of each queue, for the dashboard's charts. The
-- maintenance leader writes each minute once it is over (maintenance/series.py), from
-- the jobs that finished in it, found through jobs_finished_idx: an index range of
-- one minute's rows, never a scan of the table. The queue counters cannot give these:
-- retention and manual retries take jobs out of the completed and failed totals, so
-- the difference of two readings is not what finished in between.
--
-- wait_p50 and wait_p95: seconds from when the job's final attempt fell due (run_at)
-- to when it started, over the jobs that finished that minute. A minute in which no
-- job of a queue finished has no row for it.
CREATE TABLE {schema}.queue_minutes (
    minute    timestamptz NOT NULL,
    queue     text        NOT NULL,
    completed bigint      NOT NULL,
    failed    bigint      NOT NULL,
    wait_p50  float8,
    wait_p95  float8,
    PRIMARY KEY (minute, queue)
);
