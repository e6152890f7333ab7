-- The $1 newest workflows, newest first, each with how many of its jobs are in each
-- state. Each workflow's jobs are counted through jobs_workflow_idx, for those
-- workflows only: the cost grows with the jobs listed, not with the table.
SELECT w.id, w.name, w.created_at, c.blocked, c.pending, c.running, c.completed, c.failed,
       c.cancelled, c.waiting
FROM (SELECT id, name, created_at FROM {schema}.workflows ORDER BY id DESC LIMIT $1) AS w
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE j.status = 'blocked') AS blocked,
           count(*) FILTER (WHERE j.status = 'pending') AS pending,
           count(*) FILTER (WHERE j.status = 'running') AS running,
           count(*) FILTER (WHERE j.status = 'completed') AS completed,
           count(*) FILTER (WHERE j.status = 'failed') AS failed,
           count(*) FILTER (WHERE j.status = 'cancelled') AS cancelled,
           count(*) FILTER (WHERE j.status = 'waiting') AS waiting
    FROM {schema}.jobs AS j
    WHERE j.workflow_id = w.id
) AS c
ORDER BY w.id DESC
