-- complete.sql for a batch with workflow jobs, that also claims for this worker ($3) the
-- children their completion releases, when they fit in its $7 free slots: a chain's
-- next job starts when the statement that completed its parent returns, with no NOTIFY
-- and no claim between (docs/workflows.md). $1, $2, $3 as complete.sql; $4: the
-- results ({"<id>": result, ...} or NULL); $5 is "now" (NULL: the database's clock);
-- $6: the queues this worker may take them for (it serves them, with no limit of its
-- own); $8: the lease, in seconds; $9: the job types it has handlers for (NULL: every
-- type, claim.sql).
--
-- A child is taken only where a claim would take it now: blocked at its last parent,
-- which completes here (a child that runs only if one failed is left to the trigger);
-- in one of those queues, neither paused nor limited for every worker; due; and with
-- no due pending job of its queue as good or better by priority (claim order: those
-- come first). It gets what a claim gives (an attempt, the lease, a claim token,
-- migration 0022) and no parents left; the statement's trigger (migration 0023) then
-- finds it running and releases only the others.
-- Rows come back as claim.sql's, with "handed" last: false for a completion accepted
-- (only its id is set), true for a child claimed here.
WITH done AS (
    UPDATE {schema}.jobs AS j
    SET status = 'completed',
        last_error = NULL,
        result = $4::jsonb -> j.id::text,
        lease_expires_at = NULL,
        finished_at = COALESCE($5::timestamptz, now()),
        updated_at = COALESCE($5::timestamptz, now())
    WHERE j.id = ANY(ARRAY(SELECT unnest($1::bigint[])))
      AND j.lease_expires_at IS NOT NULL
      AND j.worker_id = $3
      AND j.claim_token = ($2::jsonb ->> j.id::text)::bigint
    RETURNING j.id, j.workflow_id
), told AS (
    SELECT pg_notify({done_channel}, string_agg(id::text, ',')) FROM done GROUP BY id / 300
), kids AS MATERIALIZED (
    -- The children of the workflow jobs completed here, as long as there are no more
    -- than $7: more than the worker can take are left to the claims, which take the
    -- best first (and a fan-out's thousands are not read twice).
    SELECT ARRAY(SELECT e.child_id FROM {schema}.workflow_edges AS e
                 WHERE e.parent_id = ANY(ARRAY(SELECT id FROM done WHERE workflow_id IS NOT NULL))
                 LIMIT $7 + 1) AS ids
), handed AS (
    UPDATE {schema}.jobs AS c
    SET status = 'running',
        parents_left = 0,
        attempts = c.attempts + 1,
        worker_id = $3,
        run_at = GREATEST(c.run_at, COALESCE($5::timestamptz, now())),
        lease_expires_at = COALESCE($5::timestamptz, now()) + make_interval(secs => $8),
        started_at = COALESCE($5::timestamptz, now()),
        updated_at = COALESCE($5::timestamptz, now()),
        progress = NULL,
        claim_token = (SELECT (random() * 9.2e18)::bigint)
    FROM kids
    WHERE c.id = ANY(kids.ids) AND cardinality(kids.ids) <= $7
      AND c.status = 'blocked' AND c.parents_left = 1
      AND c.run_if IN ('completed', 'finished')
      AND c.queue = ANY($6::text[])
      AND ($9::text[] IS NULL OR c.type = ANY($9::text[]))
      AND c.run_at <= COALESCE($5::timestamptz, now())
      AND NOT EXISTS (SELECT 1 FROM {schema}.queues AS q
                      WHERE q.name = c.queue
                        AND (q.paused_at IS NOT NULL OR q.limited))
      -- A subquery with LIMIT, never a join: one probe of the claim index per child
      -- (an anti-join could read every due job).
      AND (SELECT 1 FROM {schema}.jobs AS p
           WHERE p.status = 'pending' AND p.queue = c.queue
             AND p.priority <= c.priority
             AND p.run_at <= COALESCE($5::timestamptz, now())
           LIMIT 1) IS NULL
    RETURNING c.id, c.type, c.queue, c.payload, c.attempts, c.max_attempts, c.priority,
              c.run_at, c.trace_context, c.workflow_id, c.claim_token, c.tags, c.meta,
              c.checkpoint
)
-- Naming "told" makes it run: a WITH query nobody reads is never evaluated.
SELECT id, NULL::text AS type, NULL::text AS queue, NULL::jsonb AS payload,
       NULL::integer AS attempts, NULL::integer AS max_attempts, NULL::integer AS priority,
       NULL::timestamptz AS run_at, NULL::jsonb AS trace_context, NULL::bigint AS workflow_id,
       NULL::bigint AS claim_token, NULL::text[] AS tags, NULL::jsonb AS meta,
       NULL::jsonb AS checkpoint,
       false AS handed
FROM done WHERE (SELECT count(*) FROM told) >= 0
UNION ALL
SELECT *, true FROM handed
