-- Who holds the lead of the role $1 now, if anyone.
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
SELECT leader_id FROM {schema}.leader
WHERE name = $1 AND expires_at >= COALESCE($2::timestamptz, now())
