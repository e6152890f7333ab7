SELECT w.*,
       (SELECT count(*) FROM {schema}.jobs j WHERE j.worker_id = w.id) AS running
FROM {schema}.workers w
ORDER BY w.started_at
