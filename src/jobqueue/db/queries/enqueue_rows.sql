-- Inserts jobs of any types and options in one statement: the calls an Enqueuer
-- merged, or enqueue_jobs (POST /jobs/batch). The jobs trigger sends one NOTIFY per queue.
-- One array per column, one element per job; whole rows come back in the order given.
-- $8 is "now": NULL for the database's clock, a time for a test's (db/store.py).
-- $9: each job's trace context (JSON), or NULL.
-- $10: each job's concurrency key (migration 0020), or NULL.
INSERT INTO {schema}.jobs (type, queue, payload, priority, max_attempts, run_at, trace_context,
                           concurrency_key)
SELECT n.type, n.queue, n.payload::jsonb, n.priority, n.max_attempts,
       COALESCE(n.run_at, COALESCE($8::timestamptz, now()) + make_interval(secs => COALESCE(n.delay, 0))),
       n.trace::jsonb, n.key
FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::integer[],
            $6::timestamptz[], $7::float8[], $9::text[], $10::text[])
     WITH ORDINALITY AS n(type, queue, payload, priority, max_attempts, run_at, delay, trace, key,
                          ord)
ORDER BY n.ord
RETURNING *
