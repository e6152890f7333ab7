-- ctx.wait_for (docs/durable.md#children): whether the job's children ($2: those its
-- handler waits for) have ended; if some have not, the job becomes 'waiting' for them,
-- holding no worker's slot and no lease, its attempt not counted (as sleep.sql), and the
-- last child to end makes it pending again (migration 0035's trigger). A child that
-- failed or was cancelled, its on_failure 'cancel', cancels the job instead, as does a
-- cancel asked for meanwhile. Fenced like complete.sql ($3: the worker, $4: the
-- claim's token). $5 is "now".
-- The job waits for every child it has spawned, not only those named: the trigger counts
-- each child of a waiting job as it ends. The children are locked (FOR SHARE, in id
-- order) before the job is counted and changed, so that a child ending meanwhile either
-- committed first, and is counted as ended here, or waits for this commit and finds
-- the job waiting. Returns, per call: running (children not ended), failed (the first
-- child whose failure cancels the job), strangers (ids of $2 that are not its
-- children: nothing is changed), the job's status if it was changed, and held.
WITH kids AS (
    SELECT k.id, k.status, k.on_failure
    FROM {schema}.jobs AS k
    WHERE k.spawned_by = $1
    ORDER BY k.id
    FOR SHARE
), tally AS (
    SELECT count(*) FILTER (WHERE status NOT IN ('completed', 'failed', 'cancelled'))::integer
               AS running,
           min(id) FILTER (WHERE status IN ('failed', 'cancelled')
                             AND on_failure IS DISTINCT FROM 'continue') AS failed,
           (SELECT count(*) FROM unnest($2::bigint[]) AS g(id)
            WHERE g.id NOT IN (SELECT id FROM kids))::integer AS strangers
    FROM kids
), waited AS (
    UPDATE {schema}.jobs AS j
    SET (status, awaiting, children_left, attempts, last_error, finished_at) = (
            SELECT CASE WHEN t.failed IS NOT NULL OR j.cancel_requested_at IS NOT NULL
                        THEN 'cancelled' ELSE 'waiting' END,
                   'children',
                   t.running,
                   CASE WHEN t.failed IS NOT NULL OR j.cancel_requested_at IS NOT NULL
                        THEN j.attempts ELSE j.attempts - 1 END,
                   CASE WHEN t.failed IS NOT NULL
                        THEN 'cancelled: its child job ' || t.failed || ' failed or was cancelled'
                        WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled while running'
                        ELSE j.last_error END,
                   CASE WHEN t.failed IS NOT NULL OR j.cancel_requested_at IS NOT NULL
                        THEN COALESCE($5::timestamptz, now()) END
        ),
        worker_id = NULL,
        lease_expires_at = NULL,
        updated_at = COALESCE($5::timestamptz, now())
    FROM tally AS t
    WHERE j.id = $1
      AND j.lease_expires_at IS NOT NULL
      AND j.worker_id = $3
      AND j.claim_token = $4
      AND t.strangers = 0
      AND (t.running > 0 OR t.failed IS NOT NULL)
    RETURNING j.status
), told AS (  -- a job ended here, on the done channel as in complete.sql
    SELECT pg_notify({done_channel}, $1::text) FROM waited WHERE status = 'cancelled'
)
SELECT t.running, t.failed, t.strangers,
       (SELECT status FROM waited) AS status,
       EXISTS (SELECT 1 FROM {schema}.jobs AS j
               WHERE j.id = $1 AND j.lease_expires_at IS NOT NULL
                 AND j.worker_id = $3 AND j.claim_token = $4) AS held
FROM tally AS t
WHERE (SELECT count(*) FROM told) >= 0
