-- Forgets up to $1 unique keys whose hold ended: retention of the keys table.
DELETE FROM {schema}.unique_keys
WHERE key = ANY(ARRAY(
    SELECT key FROM {schema}.unique_keys
    WHERE held_until <> 'infinity' AND held_until < now()
    ORDER BY held_until
    LIMIT $1
    FOR UPDATE SKIP LOCKED
))
