-- Pauses a queue for every worker: claims skip it from their next statement on;
-- jobs already running finish. Pausing a paused queue keeps its first pause time.
INSERT INTO {schema}.queues AS q (name, paused_at)
VALUES ($1, now())
ON CONFLICT (name) DO UPDATE SET paused_at = COALESCE(q.paused_at, now()), updated_at = now()
RETURNING name
