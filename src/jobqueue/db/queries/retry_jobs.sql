-- Manual retry: failed or cancelled jobs are pending again at once, with fresh
-- attempts (their attempt history stays). One job ($1), or every one matching the
-- filters, one batch of at most $7 per call: the caller repeats until a batch comes
-- back short, so that no statement locks millions of rows.
-- $2 type, $3 queue, $4 finished at or after, $5 finished before (NULL: any);
-- $6 the states to retry, among failed and cancelled. Returns the ids retried.
-- The NOTIFY wakes the workers; PostgreSQL delivers one per queue, however many
-- rows ask for it.
-- $8 is "now": NULL for the database's clock, a time for a test's (db/store.py).
-- The NOTIFY says "* <queue>": the workers look for its jobs from the start (migration 0011).
WITH picked AS (
    SELECT id
    FROM {schema}.jobs
    WHERE status IN ('failed', 'cancelled')
      AND status = ANY($6::text[])
      AND ($1::bigint IS NULL OR id = $1)
      AND ($2::text IS NULL OR type = $2)
      AND ($3::text IS NULL OR queue = $3)
      AND ($4::timestamptz IS NULL OR finished_at >= $4)
      AND ($5::timestamptz IS NULL OR finished_at < $5)
    ORDER BY id
    LIMIT $7
    FOR UPDATE SKIP LOCKED
), retried AS (
    UPDATE {schema}.jobs
    SET status = 'pending',
        attempts = 0,
        run_at = COALESCE($8::timestamptz, now()),
        last_error = NULL,
        worker_id = NULL,
        started_at = NULL,
        finished_at = NULL,
        updated_at = COALESCE($8::timestamptz, now())
    WHERE id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING id, queue
)
SELECT id, pg_notify({channel}, '* ' || queue) AS notified FROM retried
