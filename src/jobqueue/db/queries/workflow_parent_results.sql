-- What a workflow job's handler sees of its parents ($1: the child): each one's ref,
-- state and result.
SELECT p.workflow_ref AS ref, p.status, p.result
FROM {schema}.workflow_edges AS e
JOIN {schema}.jobs AS p ON p.id = e.parent_id
WHERE e.child_id = $1
ORDER BY p.id
