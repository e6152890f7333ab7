-- Deletes a job that is not running and belongs to no workflow (DELETE /jobs/{id});
-- its attempts and logs go with it (ON DELETE CASCADE). A unique key it held is free
-- at once, as it would be had the job been cancelled. No row: the caller reads the
-- job for why.
WITH gone AS (
    DELETE FROM {schema}.jobs
    WHERE id = $1 AND status <> 'running' AND workflow_id IS NULL
    RETURNING id, unique_key
), freed AS (
    UPDATE {schema}.unique_keys AS k
    SET held_until = now()
    FROM gone
    WHERE gone.unique_key IS NOT NULL AND k.key = gone.unique_key AND k.job_id = gone.id
)
SELECT id FROM gone
