-- Claims up to $2 due jobs of queue $1 for worker $3, in priority order.
-- SKIP LOCKED lets concurrent workers each take different rows without waiting.
-- The update finds the rows it locked by their ctid ("ctid = ANY(ARRAY(...))"): a
-- TID scan reads each locked row version where it lies, with no primary-key descent
-- per job, and no plan can make it a scan of the table (a join with the CTE can be
-- planned as a hash join over the whole table, whose cost grows with every finished
-- job kept). The ctid is stable: the row stays locked until the claim commits. A row
-- whose newest version was committed after this statement's snapshot (and locked
-- through it) is not visible to the update and stays pending, for the next claim.
--
-- $6, $7, $8: the (priority, run_at, id) where this worker's last claim of the
-- queue ended, or NULLs to look from the start. Every claimed job leaves a dead
-- entry at the front of the claim index, and while a long transaction holds back
-- the xmin nothing can remove them: a scan from the start walks each one and its
-- heap tuple, every claim. So the scan resumes at that point ("after"), and
-- "better" still reads every priority ahead of it, where a job can appear at any
-- time (a new one, a retry or a scheduled one falling due). Behind the point, at
-- its priority, a pending job can appear only through a path that says so by
-- NOTIFY (migration 0011), and the worker then looks from the start again.
-- $5 is "now": NULL for the database's clock, a time for a test's (db/store.py).
--
-- $9: the job types this worker has handlers for, or NULL for every type (a worker run
-- with --claim-any-type). A job of another type is passed over where it lies, left
-- pending for a worker that has its handler (migration 0024): the type is read from the
-- row the index entry points to, so such jobs ahead in the queue cost a look each, once
-- per scan from the start (a claim that resumes starts behind them).
WITH better AS (
    SELECT ctid
    FROM {schema}.jobs
    WHERE status = 'pending' AND queue = $1 AND run_at <= COALESCE($5::timestamptz, now())
      AND ($9::text[] IS NULL OR type = ANY($9::text[]))
      AND priority < $6::integer
      -- A paused queue starts nothing, nor does one with limits, which
      -- claim_limited.sql claims (evaluated once per claim, not per row).
      AND NOT EXISTS (SELECT 1 FROM {schema}.queues AS q
                      WHERE q.name = $1 AND (q.paused_at IS NOT NULL OR q.limited))
    ORDER BY priority, run_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), after AS (
    SELECT ctid
    FROM {schema}.jobs
    WHERE status = 'pending' AND queue = $1 AND run_at <= COALESCE($5::timestamptz, now())
      AND ($9::text[] IS NULL OR type = ANY($9::text[]))
      AND (priority, run_at, id) >= (COALESCE($6::integer, (-2147483648)::integer),
                                     COALESCE($7::timestamptz, '-infinity'),
                                     COALESCE($8::bigint, 0))
      AND NOT EXISTS (SELECT 1 FROM {schema}.queues AS q
                      WHERE q.name = $1 AND (q.paused_at IS NOT NULL OR q.limited))
    ORDER BY priority, run_at, id
    LIMIT $2 - (SELECT count(*) FROM better)
    FOR UPDATE SKIP LOCKED
)
UPDATE {schema}.jobs AS j
SET status = 'running',
    attempts = j.attempts + 1,
    worker_id = $3,
    lease_expires_at = COALESCE($5::timestamptz, now()) + make_interval(secs => $4),
    started_at = COALESCE($5::timestamptz, now()),
    updated_at = COALESCE($5::timestamptz, now()),
    progress = NULL,  -- progress belongs to an attempt
    claim_token = (SELECT (random() * 9.2e18)::bigint)  -- one per claim (migration 0022)
WHERE j.ctid = ANY(ARRAY(SELECT ctid FROM better UNION ALL SELECT ctid FROM after))
  -- This transaction's commit does not wait for its WAL to reach the disk: on an idle
  -- worker that wait was most of a job's pickup time. A claim that a database crash
  -- forgets leaves its job pending, claimed again as after a worker's crash; the run it
  -- started is fenced out by the claim's token (migration 0022, docs/guarantees.md).
  AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
RETURNING j.id, j.type, j.queue, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at,
          j.trace_context, j.workflow_id, j.claim_token, j.tags, j.meta, j.checkpoint
