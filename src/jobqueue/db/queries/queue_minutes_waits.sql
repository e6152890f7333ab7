-- Sets the wait percentiles of the minutes (migration 0018) whose sample is not taken
-- yet and that ended $1 seconds ago, at most 60 minutes a call. A minute's sample is
-- the first $2 jobs that completed or failed in it, of any queue, found through
-- jobs_finished_idx: a bounded index range however many jobs finished that minute. A
-- queue with none in the sample keeps no wait for that minute.
-- wait: seconds from when the job's final attempt fell due (run_at) to its start.
-- The literal IN list lets the planner use the partial index on finished_at.
-- Returns how many minute rows it set.
-- $3 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH due AS (
    SELECT DISTINCT minute
    FROM {schema}.queue_minutes
    WHERE NOT waited
      AND minute < date_trunc('minute', COALESCE($3::timestamptz, now()) - make_interval(secs => $1))
    ORDER BY minute
    LIMIT 60
), sample AS (
    SELECT due.minute, s.queue, s.wait
    FROM due
    CROSS JOIN LATERAL (
        SELECT j.queue, extract(epoch FROM j.started_at - j.run_at) AS wait
        FROM {schema}.jobs AS j
        WHERE j.status IN ('completed', 'failed', 'cancelled')
          AND j.status IN ('completed', 'failed')
          AND j.finished_at >= due.minute
          AND j.finished_at < due.minute + interval '1 minute'
        ORDER BY j.finished_at
        LIMIT $2
    ) AS s
), waits AS (
    SELECT minute, queue,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY wait) AS p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY wait) AS p95
    FROM sample
    GROUP BY minute, queue
), set AS (
    UPDATE {schema}.queue_minutes AS m
    SET waited = true,
        wait_p50 = (SELECT w.p50 FROM waits AS w WHERE w.minute = m.minute AND w.queue = m.queue),
        wait_p95 = (SELECT w.p95 FROM waits AS w WHERE w.minute = m.minute AND w.queue = m.queue)
    WHERE m.minute IN (SELECT minute FROM due) AND NOT m.waited
    RETURNING 1
)
SELECT count(*) FROM set
