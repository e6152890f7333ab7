-- Becomes or stays leader for $3 seconds. A row comes back only to the process that
-- holds the lead after this statement: the current holder, or anyone once it expired.
-- $4 is "now": NULL for the database's clock, a time for a test's (db/store.py).
INSERT INTO {schema}.leader (name, leader_id, expires_at)
VALUES ($1, $2, COALESCE($4::timestamptz, now()) + make_interval(secs => $3))
ON CONFLICT (name) DO UPDATE
SET leader_id = EXCLUDED.leader_id, expires_at = EXCLUDED.expires_at
WHERE {schema}.leader.leader_id = EXCLUDED.leader_id OR {schema}.leader.expires_at < COALESCE($4::timestamptz, now())
RETURNING leader_id
