-- Newest first; $2, $3: the types and queues to list (NULL: any); $4 is the keyset
-- cursor: the last id of the previous page.
SELECT *
FROM {schema}.jobs
WHERE ($1::text IS NULL OR status = $1)
  AND ($2::text[] IS NULL OR type = ANY($2))
  AND ($3::text[] IS NULL OR queue = ANY($3))
  AND ($4::bigint IS NULL OR id < $4)
ORDER BY id DESC
LIMIT $5
