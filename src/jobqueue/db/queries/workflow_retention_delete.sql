-- Deletes at most $3 workflows whose every job has ended past its retention: $1
-- seconds for completed and cancelled jobs, $2 for failed ones (NULL: kept). A workflow
-- goes as a whole, its jobs and its edges with it, in one statement, never half of it
-- (retention_delete.sql leaves workflow jobs alone). The attempt history of its jobs
-- goes with them (ON DELETE CASCADE).
-- $4 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH picked AS (
    SELECT w.id
    FROM {schema}.workflows AS w
    WHERE w.created_at < COALESCE($4::timestamptz, now())
                         - make_interval(secs => LEAST(COALESCE($1::float8, $2::float8), COALESCE($2::float8, $1::float8)))
      AND NOT EXISTS (
        SELECT 1 FROM {schema}.jobs AS j
        WHERE j.workflow_id = w.id
          AND NOT (j.status IN ('completed', 'cancelled') AND $1::float8 IS NOT NULL
                   AND j.finished_at < COALESCE($4::timestamptz, now()) - make_interval(secs => $1::float8))
          AND NOT (j.status = 'failed' AND $2::float8 IS NOT NULL
                   AND j.finished_at < COALESCE($4::timestamptz, now()) - make_interval(secs => $2::float8)))
    ORDER BY w.id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), jobs_gone AS (
    DELETE FROM {schema}.jobs
    WHERE workflow_id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING id
), edges_gone AS (
    DELETE FROM {schema}.workflow_edges
    WHERE child_id = ANY(ARRAY(SELECT id FROM jobs_gone))
)
DELETE FROM {schema}.workflows
WHERE id = ANY(ARRAY(SELECT id FROM picked))
