-- Makes a pending job due now (POST /jobs/{id}/run-now): a scheduled one, or one
-- waiting to retry; one due already is left as it is. Workers are told of its queue
-- from the start, as in job_update.sql. $2 is "now".
WITH changed AS (
    UPDATE {schema}.jobs AS j
    SET run_at = COALESCE($2::timestamptz, now()), updated_at = COALESCE($2::timestamptz, now())
    WHERE j.id = $1 AND j.status = 'pending' AND j.run_at > COALESCE($2::timestamptz, now())
    RETURNING j.*
)
SELECT c.*, pg_notify({channel}, '* ' || c.queue) IS NULL AS notified
FROM changed AS c
