-- A job's children (ctx.spawn), for GET /jobs/{id} and the dashboard's job page: the
-- first $2 of them, by id, and how many there are and have ended.
SELECT id, type, status,
       count(*) OVER () AS total,
       count(*) FILTER (WHERE status IN ('completed', 'failed', 'cancelled')) OVER () AS ended
FROM {schema}.jobs
WHERE spawned_by = $1
ORDER BY id
LIMIT $2
