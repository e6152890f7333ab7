-- Forgets workers silent for longer than $1 seconds (they died without saying so).
DELETE FROM {schema}.workers
WHERE heartbeat_at < now() - make_interval(secs => $1)
RETURNING id
