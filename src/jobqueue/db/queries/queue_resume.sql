-- Resumes a paused queue and wakes the workers at once (they would otherwise wait
-- for their next poll). Resuming a queue that is not paused changes nothing.
-- The NOTIFY says "* <queue>": the workers look for its jobs from the start (migration 0011).
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
UPDATE {schema}.queues
SET paused_at = NULL, updated_at = COALESCE($2::timestamptz, now())
WHERE name = $1 AND paused_at IS NOT NULL
RETURNING name, pg_notify({channel}, '* ' || name) AS notified
