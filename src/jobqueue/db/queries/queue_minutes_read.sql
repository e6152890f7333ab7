-- The per-minute rows since $1, summed over the queues $2 (NULL: all), in buckets of
-- $3 seconds, oldest first. The wait is the worst queue's of the bucket: percentiles
-- of different queues cannot be combined exactly, and the worst is what an operator
-- looks for. Reads at most a day of rows through the primary key.
SELECT date_bin(make_interval(secs => $3), minute, 'epoch'::timestamptz) AS at,
       sum(completed)::bigint AS completed,
       sum(failed)::bigint AS failed,
       max(wait_p50) AS wait_p50,
       max(wait_p95) AS wait_p95
FROM {schema}.queue_minutes
WHERE minute >= $1
  AND ($2::text[] IS NULL OR queue = ANY($2))
GROUP BY 1
ORDER BY 1
