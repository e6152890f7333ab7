-- The leader's due schedules, locked until their ticks are enqueued and next_run_at has
-- moved on in the same transaction; SKIP LOCKED: a second leader passes them over, and
-- finds them not due once this one commits. $1 is "now" (db/store.py).
SELECT s.*, NULL::text AS last_job_status
FROM {schema}.schedules s
WHERE s.enabled AND s.next_run_at <= COALESCE($1::timestamptz, now())
ORDER BY s.next_run_at
LIMIT $2
FOR UPDATE SKIP LOCKED
