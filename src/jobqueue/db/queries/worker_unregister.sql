DELETE FROM {schema}.workers WHERE id = $1
