-- A workflow's dependencies: $1[i] waits for $2[i].
INSERT INTO {schema}.workflow_edges (child_id, parent_id)
SELECT * FROM unnest($1::bigint[], $2::bigint[])
