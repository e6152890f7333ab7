-- The schedules declared in code (@jq.task(cron=...), JOBQUEUE_CRON) as the leader's
-- code has them: new ones inserted, changed ones updated (a changed timing starts
-- again from its first tick), paused ones kept paused. A name taken by a schedule
-- made over HTTP keeps that one. Returns the names inserted or changed.
INSERT INTO {schema}.schedules AS s (name, type, cron, timezone, queue, priority, missed,
                                     source, next_run_at)
SELECT n.name, n.type, n.cron, n.timezone, n.queue, n.priority, 'once', 'code', n.first
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::integer[],
            $7::timestamptz[]) AS n(name, type, cron, timezone, queue, priority, first)
ON CONFLICT (name) DO UPDATE
SET type = EXCLUDED.type, cron = EXCLUDED.cron, timezone = EXCLUDED.timezone,
    queue = EXCLUDED.queue, priority = EXCLUDED.priority,
    next_run_at = CASE WHEN (s.cron, s.timezone) IS DISTINCT FROM (EXCLUDED.cron, EXCLUDED.timezone)
                       THEN EXCLUDED.next_run_at ELSE s.next_run_at END,
    updated_at = now()
WHERE s.source = 'code'
  AND (s.type, s.cron, s.timezone, s.queue, s.priority)
      IS DISTINCT FROM (EXCLUDED.type, EXCLUDED.cron, EXCLUDED.timezone, EXCLUDED.queue,
                        EXCLUDED.priority)
RETURNING s.name
