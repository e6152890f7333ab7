-- One schedule, with the state of the last job it enqueued (NULL once that job is gone).
SELECT s.*, j.status AS last_job_status
FROM {schema}.schedules s
LEFT JOIN {schema}.jobs j ON j.id = s.last_job_id
WHERE s.name = $1
