-- Every job of workflow $1, with the refs of the jobs it waits for, in creation order.
-- The edges are joined once, not looked up per job: a workflow's parents are its own.
SELECT j.*, COALESCE(d.depends_on, '{}') AS depends_on
FROM {schema}.jobs AS j
LEFT JOIN (
    SELECT e.child_id, array_agg(p.workflow_ref ORDER BY p.id) AS depends_on
    FROM {schema}.jobs AS p
    JOIN {schema}.workflow_edges AS e ON e.parent_id = p.id
    WHERE p.workflow_id = $1
    GROUP BY e.child_id
) AS d ON d.child_id = j.id
WHERE j.workflow_id = $1
ORDER BY j.id
