-- Every job of workflow $1, with the refs of the jobs it waits for, in creation order.
SELECT j.*,
       ARRAY(SELECT p.workflow_ref
             FROM {schema}.workflow_edges AS e
             JOIN {schema}.jobs AS p ON p.id = e.parent_id
             WHERE e.child_id = j.id
             ORDER BY p.id) AS depends_on
FROM {schema}.jobs AS j
WHERE j.workflow_id = $1
ORDER BY j.id
