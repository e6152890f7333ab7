-- Makes the jobs ctx.spawn just inserted ($3) children of the job whose handler spawned
-- them ($1), with their on_failure ($2: 'cancel' or 'continue'; docs/durable.md#children),
-- in the spawn's transaction, fenced like complete.sql: only the attempt this worker
-- still holds ($4: the worker, $5: the claim's token) adopts them, and the caller rolls
-- back the spawn when it does not. The parent's children_left becomes 0 if it was NULL:
-- a job that has children, whose end (failed or cancelled) cancels those still to end
-- (migration 0035). The parent's row is locked to the commit, so that no rescue takes
-- the job meanwhile. Returns held: whether the attempt is still this worker's.
WITH parent AS (
    UPDATE {schema}.jobs AS j
    SET children_left = COALESCE(j.children_left, 0)
    WHERE j.id = $1
      AND j.lease_expires_at IS NOT NULL
      AND j.worker_id = $4
      AND j.claim_token = $5
    RETURNING j.id
), adopted AS (
    UPDATE {schema}.jobs AS c
    SET spawned_by = $1, on_failure = $2
    WHERE c.id = ANY($3::bigint[]) AND EXISTS (SELECT 1 FROM parent)
)
SELECT EXISTS (SELECT 1 FROM parent) AS held
