-- Inserts jobs of any types and options in one statement: the calls an Enqueuer
-- merged, or enqueue_jobs (POST /jobs/batch). The jobs trigger sends one NOTIFY per queue.
-- One array per column, one element per job; whole rows come back in the order given.
-- $8 is "now": NULL for the database's clock, a time for a test's (db/store.py).
-- $9: each job's trace context (JSON), or NULL.
-- $10: each job's concurrency key (migration 0020), or NULL.
-- $11, $12: each job's tags, as a JSON array, and metadata (migration 0030), or NULL:
-- arrays of arrays must be rectangular in PostgreSQL, so each job's tags travel as text.
INSERT INTO {schema}.jobs (type, queue, payload, priority, max_attempts, run_at, trace_context,
                           concurrency_key, tags, meta)
SELECT n.type, n.queue, n.payload::jsonb, n.priority, n.max_attempts,
       COALESCE(n.run_at, COALESCE($8::timestamptz, now()) + make_interval(secs => COALESCE(n.delay, 0))),
       n.trace::jsonb, n.key,
       CASE WHEN n.tags IS NOT NULL
            THEN ARRAY(SELECT jsonb_array_elements_text(n.tags::jsonb)) END,
       n.meta::jsonb
FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::integer[],
            $6::timestamptz[], $7::float8[], $9::text[], $10::text[], $11::text[], $12::text[])
     WITH ORDINALITY AS n(type, queue, payload, priority, max_attempts, run_at, delay, trace, key,
                          tags, meta, ord)
ORDER BY n.ord
RETURNING *
