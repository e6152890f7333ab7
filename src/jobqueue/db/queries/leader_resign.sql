DELETE FROM {schema}.leader WHERE name = $1 AND leader_id = $2
