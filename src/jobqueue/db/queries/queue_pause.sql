-- Pauses a queue for every worker: claims skip it from their next statement on;
-- jobs already running finish. Pausing a paused queue keeps its first pause time.
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
INSERT INTO {schema}.queues AS q (name, paused_at)
VALUES ($1, COALESCE($2::timestamptz, now()))
ON CONFLICT (name) DO UPDATE SET paused_at = COALESCE(q.paused_at, COALESCE($2::timestamptz, now())), updated_at = COALESCE($2::timestamptz, now())
RETURNING name
