-- The waiting jobs of each queue (ctx.sleep, migration 0033), counted from their
-- partial index, which holds the queue: what GET /queues and the metrics show as
-- "waiting". The counters (queue_count_changes) leave waiting jobs out, as they leave
-- out a workflow's blocked ones, so this read costs in proportion to the jobs asleep.
-- $1: one queue, or NULL for every queue.
SELECT queue, count(*) AS waiting
FROM {schema}.jobs
WHERE status = 'waiting'
  AND ($1::text IS NULL OR queue = $1)
GROUP BY queue
