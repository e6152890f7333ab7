-- Inserts a workflow's jobs ($10) in one statement, as enqueue_rows.sql does, each with
-- its ref ($11), its state ($12: pending for a job without parents, else blocked), the
-- parents it waits for ($13), its policies ($14 on_failure, $15 run_if). Ids come back
-- in the order given. $8 is "now" as in enqueue_rows.sql; $9: trace contexts; $16:
-- concurrency keys (migration 0020); $17 to $20: tags, metadata and where each job's
-- tags are among $17, as in enqueue_rows.sql (migration 0030).
-- A job with tags or metadata gets its row in job_labels in the same statement
-- (migration 0031 says why not by a trigger).
WITH job AS (
    INSERT INTO {schema}.jobs (type, queue, payload, priority, max_attempts, run_at, trace_context,
                               workflow_id, workflow_ref, status, parents_left, parents_failed,
                               on_failure, run_if, concurrency_key, tags, meta)
    SELECT n.type, n.queue, n.payload::jsonb, n.priority, n.max_attempts,
           COALESCE(n.run_at, COALESCE($8::timestamptz, now()) + make_interval(secs => COALESCE(n.delay, 0))),
           n.trace::jsonb, $10, n.ref, n.status, n.parents, 0, n.on_failure, n.run_if, n.key,
           ($17::text[])[n.tags_from:n.tags_to],
           n.meta::jsonb
    FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::integer[],
                $6::timestamptz[], $7::float8[], $9::text[], $11::text[], $12::text[],
                $13::integer[], $14::text[], $15::text[], $16::text[], $18::text[],
                $19::integer[], $20::integer[])
         WITH ORDINALITY AS n(type, queue, payload, priority, max_attempts, run_at, delay, trace,
                              ref, status, parents, on_failure, run_if, key, meta, tags_from,
                              tags_to, ord)
    ORDER BY n.ord
    RETURNING id, tags, meta
), labels AS (  -- the search's copy (migration 0031)
    INSERT INTO {schema}.job_labels (job_id, tags, meta)
    SELECT id, tags, meta FROM job WHERE tags IS NOT NULL OR meta IS NOT NULL
)
SELECT id FROM job
