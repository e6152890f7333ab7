-- The job types that the workers serving queue $2 whose heartbeat is at most $1 seconds
-- old have handlers for (`jobqueue enqueue` refuses any other). A worker of a version
-- before migration 0024 announces none.
-- $3 is "now": NULL for the database's clock, a time for a test's (db/store.py).
SELECT DISTINCT t.type
FROM {schema}.workers AS w, unnest(w.types) AS t (type)
WHERE w.heartbeat_at >= COALESCE($3::timestamptz, now()) - make_interval(secs => $1)
  AND $2 = ANY(w.queues)
ORDER BY t.type
