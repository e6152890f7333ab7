INSERT INTO {schema}.workers (id, host, pid, queues, slots)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()
