-- Claims up to $2 due jobs of queue $1 for worker $3 within the queue's limits
-- (migration 0020, docs/limits.md). Runs in a transaction after limit_lock.sql, which
-- holds the queue's row: every claim of this queue that started jobs before this one
-- has committed, so what is counted here is at least what is running. Jobs that end
-- meanwhile only make the counts high, never low, and no limit can be exceeded.
--
-- room: the jobs the queue may start now: $2, less what global_limit leaves (running
-- jobs, from the counters kept by migration 0009's triggers) and what the rate leaves
-- (starts since now minus the period). "Now" is the clock once the lock is held,
-- so that the starts logged by successive claims are in order: each claim's count
-- covers the period that ends at its own start, hence any window of that period.
-- Each count is read only when its limit is set.
--
-- With a key limit (or a per-key rate) the jobs are taken key by key, in key order
-- starting after the key the last claim served (key_cursor), wrapping around: every
-- key with due jobs gets its turn before any gets a second, whatever their backlogs.
-- A key gets at most its room (key_limit less its running jobs, the key rate less
-- its starts); the walk steps from key to key on jobs_key_claim_idx, visiting at most
-- 1,000 keys per claim (the next claim goes on from there). Jobs without a key are
-- limited by the queue's limits alone and come after the keyed ones, taken from the
-- first 1,000 due jobs in claim order (a claim never walks a whole keyed backlog to
-- find one; as the backlog drains, they come to the front).
-- $5 is "now": NULL for the database's clock, a time for a test's (db/store.py).
-- $6: the job types this worker has handlers for, or NULL for every type (claim.sql).
WITH RECURSIVE q AS MATERIALIZED (
    SELECT q.global_limit, q.key_limit, q.rate_count, q.rate_period,
           q.key_rate_count, q.key_rate_period, q.key_cursor,
           q.name IS NOT NULL AND q.paused_at IS NOT NULL AS paused,
           q.key_limit IS NOT NULL OR q.key_rate_count IS NOT NULL AS keyed,
           COALESCE($5::timestamptz, clock_timestamp()) AS t,
           COALESCE($5::timestamptz, now()) AS due
    FROM (VALUES (1)) AS one
    LEFT JOIN {schema}.queues AS q ON q.name = $1
), room AS MATERIALIZED (
    SELECT (CASE WHEN q.paused THEN 0 ELSE GREATEST(0, LEAST(
        $2,
        CASE WHEN q.global_limit IS NOT NULL THEN q.global_limit - (
            SELECT COALESCE(sum(c.running), 0)
            FROM (SELECT running FROM {schema}.queue_totals WHERE queue = $1
                  UNION ALL
                  SELECT running FROM {schema}.queue_count_changes WHERE queue = $1) AS c
        ) END,
        CASE WHEN q.rate_count IS NOT NULL THEN q.rate_count - (
            SELECT count(*) FROM {schema}.queue_starts AS s
            WHERE s.queue = $1 AND s.at > q.t - q.rate_period
        ) END
    )) END)::bigint AS n
    FROM q
), plain AS (
    SELECT j.id
    FROM {schema}.jobs AS j
    WHERE j.status = 'pending' AND j.queue = $1 AND j.run_at <= (SELECT due FROM q)
      AND ($6::text[] IS NULL OR j.type = ANY($6::text[]))
      AND NOT (SELECT keyed FROM q)
    ORDER BY j.priority, j.run_at, j.id
    LIMIT (SELECT n FROM room)
    FOR UPDATE SKIP LOCKED
), after (k, n) AS (
    (SELECT j.concurrency_key, 1
     FROM {schema}.jobs AS j
     WHERE j.status = 'pending' AND j.queue = $1 AND j.concurrency_key IS NOT NULL
       AND j.concurrency_key > COALESCE((SELECT key_cursor FROM q), '')
       AND (SELECT keyed FROM q) AND (SELECT n FROM room) > 0
     ORDER BY j.concurrency_key LIMIT 1)
    UNION ALL
    SELECT (SELECT j.concurrency_key
            FROM {schema}.jobs AS j
            WHERE j.status = 'pending' AND j.queue = $1 AND j.concurrency_key IS NOT NULL
              AND j.concurrency_key > a.k
            ORDER BY j.concurrency_key LIMIT 1), a.n + 1
    FROM after AS a
    WHERE a.k IS NOT NULL AND a.n < 1000
), wrapped (k, n) AS (  -- from the first key up to the cursor
    (SELECT j.concurrency_key, 1
     FROM {schema}.jobs AS j
     WHERE j.status = 'pending' AND j.queue = $1 AND j.concurrency_key IS NOT NULL
       AND j.concurrency_key <= (SELECT key_cursor FROM q)
       AND (SELECT keyed FROM q) AND (SELECT n FROM room) > 0
     ORDER BY j.concurrency_key LIMIT 1)
    UNION ALL
    SELECT (SELECT j.concurrency_key
            FROM {schema}.jobs AS j
            WHERE j.status = 'pending' AND j.queue = $1 AND j.concurrency_key IS NOT NULL
              AND j.concurrency_key > w.k AND j.concurrency_key <= (SELECT key_cursor FROM q)
            ORDER BY j.concurrency_key LIMIT 1), w.n + 1
    FROM wrapped AS w
    WHERE w.k IS NOT NULL AND w.n < 1000 - (SELECT count(*) FROM after)
), keys AS (
    SELECT k, n FROM after WHERE k IS NOT NULL
    UNION ALL
    SELECT k, 1000 + n FROM wrapped WHERE k IS NOT NULL
), keyed AS MATERIALIZED (
    SELECT picked.id, keys.k, keys.n
    FROM keys
    CROSS JOIN LATERAL (
        SELECT j.id
        FROM {schema}.jobs AS j
        WHERE j.status = 'pending' AND j.queue = $1 AND j.concurrency_key = keys.k
          AND j.run_at <= (SELECT due FROM q)
          AND ($6::text[] IS NULL OR j.type = ANY($6::text[]))
        ORDER BY j.priority, j.run_at, j.id
        LIMIT GREATEST(0, LEAST(
            CASE WHEN (SELECT key_limit FROM q) IS NOT NULL THEN (SELECT key_limit FROM q) - (
                SELECT count(*) FROM {schema}.jobs AS r
                WHERE r.status = 'running' AND r.queue = $1 AND r.concurrency_key = keys.k
            ) END,
            CASE WHEN (SELECT key_rate_count FROM q) IS NOT NULL THEN (SELECT key_rate_count FROM q) - (
                SELECT count(*) FROM {schema}.queue_starts AS s
                WHERE s.queue = $1 AND s.key = keys.k
                  AND s.at > (SELECT t - key_rate_period FROM q)
            ) END
        ))
        FOR UPDATE SKIP LOCKED
    ) AS picked
    LIMIT (SELECT n FROM room)
), keyless AS (  -- among the first 1,000 due jobs, so that a keyed backlog costs no walk
    SELECT j.id
    FROM {schema}.jobs AS j
    WHERE j.id = ANY(ARRAY(
            SELECT f.id
            FROM (SELECT d.id, d.concurrency_key, d.type
                  FROM {schema}.jobs AS d
                  WHERE d.status = 'pending' AND d.queue = $1 AND d.run_at <= (SELECT due FROM q)
                    AND (SELECT keyed FROM q)
                  ORDER BY d.priority, d.run_at, d.id
                  LIMIT 1000) AS f
            WHERE f.concurrency_key IS NULL AND ($6::text[] IS NULL OR f.type = ANY($6::text[]))
            LIMIT (SELECT n FROM room) - (SELECT count(*) FROM keyed)))
      AND j.status = 'pending'
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE {schema}.jobs AS j
    SET status = 'running',
        attempts = j.attempts + 1,
        worker_id = $3,
        lease_expires_at = (SELECT t FROM q) + make_interval(secs => $4),
        started_at = (SELECT t FROM q),
        updated_at = (SELECT t FROM q),
        progress = NULL,  -- progress belongs to an attempt
        claim_token = (SELECT (random() * 9.2e18)::bigint)  -- one per claim (migration 0022)
    WHERE j.id = ANY(ARRAY(SELECT id FROM plain UNION ALL SELECT id FROM keyed
                           UNION ALL SELECT id FROM keyless))
      -- A claim's commit does not wait for its WAL to reach the disk (claim.sql says
      -- why); its transaction's queue lock is given back sooner too.
      AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
    RETURNING j.id, j.type, j.queue, j.payload, j.attempts, j.max_attempts, j.priority,
              j.run_at, j.trace_context, j.workflow_id, j.concurrency_key, j.claim_token,
              j.tags, j.meta, j.checkpoint
), logged AS (
    INSERT INTO {schema}.queue_starts (queue, key, at)
    SELECT $1, c.concurrency_key, q.t
    FROM claimed AS c, q
    WHERE q.rate_count IS NOT NULL OR q.key_rate_count IS NOT NULL
), forgotten AS (
    DELETE FROM {schema}.queue_starts AS s
    USING q
    WHERE s.queue = $1
      AND s.at <= q.t - GREATEST(COALESCE(q.rate_period, interval '0'),
                                 COALESCE(q.key_rate_period, interval '0'))
), turned AS (  -- the next claim starts after the last key served (or visited)
    UPDATE {schema}.queues AS qs
    SET key_cursor = COALESCE((SELECT k FROM keyed ORDER BY n DESC LIMIT 1),
                              (SELECT k FROM keys ORDER BY n DESC LIMIT 1),
                              qs.key_cursor)
    FROM q
    WHERE qs.name = $1 AND q.keyed
)
-- The columns of claim.sql, in its order (ClaimedJob.from_record).
SELECT id, type, queue, payload, attempts, max_attempts, priority, run_at, trace_context,
       workflow_id, claim_token, tags, meta, checkpoint
FROM claimed
