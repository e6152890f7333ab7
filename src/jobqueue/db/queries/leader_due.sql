-- What the maintenance leader's per-second loop looks at, in one probe: seconds until
-- the earliest enabled schedule's tick, and until the earliest waiting job's time
-- (ctx.sleep, a signal's time limit); each 0 or less when due, NULL when there is none. Each
-- is the first entry of a partial index (schedules_due_idx, jobs_wake_idx), so an
-- idle leader reads two index pages a second. $1 is "now".
SELECT (SELECT EXTRACT(EPOCH FROM min(next_run_at) - COALESCE($1::timestamptz, now()))::float8
        FROM {schema}.schedules
        WHERE enabled) AS schedule_in,
       (SELECT EXTRACT(EPOCH FROM min(run_at) - COALESCE($1::timestamptz, now()))::float8
        FROM {schema}.jobs
        WHERE status = 'waiting' AND awaiting IS NULL) AS wake_in
