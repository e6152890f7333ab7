-- The job that holds a unique key, if it still exists.
SELECT j.*
FROM {schema}.unique_keys AS k
JOIN {schema}.jobs AS j ON j.id = k.job_id
WHERE k.key = $1
