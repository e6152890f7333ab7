-- Seconds until the earliest enabled tick (negative: due), or NULL with none. $1: "now".
SELECT EXTRACT(EPOCH FROM min(next_run_at) - COALESCE($1::timestamptz, now()))::float8
FROM {schema}.schedules
WHERE enabled
