-- A new workflow's row ($1: its name, or NULL); its jobs follow in the same transaction.
INSERT INTO {schema}.workflows (name) VALUES ($1)
RETURNING id
