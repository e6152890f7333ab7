-- One workflow's row.
SELECT id, name, created_at FROM {schema}.workflows WHERE id = $1
