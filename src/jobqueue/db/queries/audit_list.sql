-- Newest first, by the primary key; $3 is the keyset cursor: the last id of the
-- previous page. $1 actor, $2 action (NULL: any).
SELECT id, at, actor, action, target, filter::text AS filter, count, client, result
FROM {schema}.audit_log
WHERE ($1::text IS NULL OR actor = $1)
  AND ($2::text IS NULL OR action = $2)
  AND ($3::bigint IS NULL OR id < $3)
ORDER BY id DESC
LIMIT $4
