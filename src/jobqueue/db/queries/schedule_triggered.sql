-- Records the job a trigger (POST /schedules/{name}/trigger) enqueued as the last one.
UPDATE {schema}.schedules SET last_job_id = $2 WHERE name = $1
