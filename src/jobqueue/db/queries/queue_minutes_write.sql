-- Writes the per-minute rows (migration 0017) of every whole minute not written yet,
-- up to the minute that ended $1 seconds ago (a grace for transactions that finished
-- jobs in it and had not committed yet), and at most one day back. The minutes are
-- found from the last one written, so each round reads only the rows that finished
-- since. The literal IN list lets the planner use the partial index on finished_at.
-- Returns how many rows were written.
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH bounds AS (
    SELECT greatest(
               (SELECT max(minute) FROM {schema}.queue_minutes) + interval '1 minute',
               date_trunc('minute', COALESCE($2::timestamptz, now())) - interval '1 day'
           ) AS since,
           date_trunc('minute', COALESCE($2::timestamptz, now()) - make_interval(secs => $1))
               AS until
), written AS (
    INSERT INTO {schema}.queue_minutes (minute, queue, completed, failed, wait_p50, wait_p95)
    SELECT date_trunc('minute', j.finished_at), j.queue,
           count(*) FILTER (WHERE j.status = 'completed'),
           count(*) FILTER (WHERE j.status = 'failed'),
           percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM j.started_at - j.run_at)),
           percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM j.started_at - j.run_at))
    FROM {schema}.jobs AS j, bounds
    WHERE j.status IN ('completed', 'failed', 'cancelled')
      AND j.status IN ('completed', 'failed')
      AND j.finished_at >= bounds.since
      AND j.finished_at < bounds.until
    GROUP BY 1, 2
    ON CONFLICT (minute, queue) DO NOTHING
    RETURNING 1
)
SELECT count(*) FROM written
