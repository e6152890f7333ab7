-- Inserts a workflow's jobs ($10) in one statement, as enqueue_rows.sql does, each with
-- its ref ($11), its state ($12: pending for a job without parents, else blocked), the
-- parents it waits for ($13), its policies ($14 on_failure, $15 run_if). Ids come back
-- in the order given. $8 is "now" as in enqueue_rows.sql; $9: trace contexts; $16:
-- concurrency keys (migration 0020); $17, $18: tags (JSON arrays) and metadata, as in
-- enqueue_rows.sql (migration 0030).
INSERT INTO {schema}.jobs (type, queue, payload, priority, max_attempts, run_at, trace_context,
                           workflow_id, workflow_ref, status, parents_left, parents_failed,
                           on_failure, run_if, concurrency_key, tags, meta)
SELECT n.type, n.queue, n.payload::jsonb, n.priority, n.max_attempts,
       COALESCE(n.run_at, COALESCE($8::timestamptz, now()) + make_interval(secs => COALESCE(n.delay, 0))),
       n.trace::jsonb, $10, n.ref, n.status, n.parents, 0, n.on_failure, n.run_if, n.key,
       CASE WHEN n.tags IS NOT NULL
            THEN ARRAY(SELECT jsonb_array_elements_text(n.tags::jsonb)) END,
       n.meta::jsonb
FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::integer[],
            $6::timestamptz[], $7::float8[], $9::text[], $11::text[], $12::text[],
            $13::integer[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[])
     WITH ORDINALITY AS n(type, queue, payload, priority, max_attempts, run_at, delay, trace,
                          ref, status, parents, on_failure, run_if, key, tags, meta, ord)
ORDER BY n.ord
RETURNING id
