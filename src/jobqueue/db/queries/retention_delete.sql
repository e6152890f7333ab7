-- Deletes at most $3 jobs in the states $1 (among completed, failed, cancelled) that
-- finished more than $2 seconds ago, oldest first. The leader calls it in a loop, so
-- that each statement holds its row locks for milliseconds. Their attempt history
-- goes with them (ON DELETE CASCADE). The literal IN list lets the planner use the
-- partial index on finished_at; = ANY($1) then picks among those states.
-- Workflow jobs are left to workflow_retention_delete.sql, which deletes a workflow whole.
-- $4 is "now": NULL for the database's clock, a time for a test's (db/store.py).
DELETE FROM {schema}.jobs
WHERE id = ANY(ARRAY(
    SELECT id
    FROM {schema}.jobs
    WHERE status IN ('completed', 'failed', 'cancelled')
      AND status = ANY($1::text[])
      AND workflow_id IS NULL
      AND finished_at < COALESCE($4::timestamptz, now()) - make_interval(secs => $2)
    ORDER BY finished_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
))
