-- Schedules by name, a page at a time: those after $1 (NULL: from the first), at most $2.
SELECT s.*, j.status AS last_job_status
FROM {schema}.schedules s
LEFT JOIN {schema}.jobs j ON j.id = s.last_job_id
WHERE $1::text IS NULL OR s.name > $1
ORDER BY s.name
LIMIT $2
