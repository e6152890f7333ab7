-- Ends a batch of attempts: $4 is 'completed', or 'cancelled' for attempts stopped
-- because their job was cancelled ($5: the error to record, or NULL). $1: the job
-- ids; $2: {"<id>": claim token, ...}; $6: {"<id>": result, ...} for the handlers that
-- returned something, or NULL. Fenced: a row changes only while it runs (it holds a
-- lease) and the same worker ($3) still holds it by the same claim (its random token,
-- migration 0022, names one claim of one attempt); the ids returned are the writes
-- accepted. The worker stays on the ended job, as the one that ran its last attempt
-- (GET /jobs/{id} and its attempts), so every fenced write asks for the lease too. It
-- asks for the lease, not for status = 'running': that condition would let the planner
-- scan the partial index of running jobs (jobs_lease_idx) instead of the primary key.
-- The ids that ended are announced on the done channel (jq.wait listens there), 300
-- per message to stay under NOTIFY's 8000-byte payload.
--
-- No join with unnest(): when most rows have worker_id NULL (pending jobs, and
-- finished ones before they kept their worker), the planner estimates "worker_id = $3"
-- at one row, scans the whole table and loops over the array for every row; seen at
-- 8 s for 1,500 jobs. Here the only plan is a primary-key lookup per id, and the
-- attempt is looked up in the JSON object.
-- The ids come through ARRAY(SELECT unnest($1)), which the planner sizes alike whatever
-- $1 holds: with "id = ANY($1)" a plan made for one id looked cheaper than the generic
-- one, and a worker ending jobs one at a time (the latency path, a chain of workflow
-- jobs) planned every completion (0.1 ms each); this way the plan is kept.
-- $7 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH done AS (
    UPDATE {schema}.jobs AS j
    SET status = $4,
        last_error = $5,
        result = $6::jsonb -> j.id::text,
        lease_expires_at = NULL,
        finished_at = COALESCE($7::timestamptz, now()),
        updated_at = COALESCE($7::timestamptz, now())
    WHERE j.id = ANY(ARRAY(SELECT unnest($1::bigint[])))
      AND j.lease_expires_at IS NOT NULL
      AND j.worker_id = $3
      AND j.claim_token = ($2::jsonb ->> j.id::text)::bigint
    RETURNING j.id
), told AS (
    SELECT pg_notify({done_channel}, string_agg(id::text, ',')) FROM done GROUP BY id / 300
)
-- Naming "told" makes it run: a WITH query nobody reads is never evaluated.
SELECT id FROM done WHERE (SELECT count(*) FROM told) >= 0
