-- Deletes at most $2 audit rows older than $1 seconds, oldest first, through the index
-- on at; the leader calls it in a loop (maintenance/retention.py).
-- $3 is "now": NULL for the database's clock, a time for a test's (db/store.py).
DELETE FROM {schema}.audit_log
WHERE id = ANY(ARRAY(
    SELECT id
    FROM {schema}.audit_log
    WHERE at < COALESCE($3::timestamptz, now()) - make_interval(secs => $1)
    ORDER BY at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
))
