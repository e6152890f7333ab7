UPDATE {schema}.workers SET heartbeat_at = now() WHERE id = $1
