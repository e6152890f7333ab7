-- Hands unfinished jobs back at shutdown: pending again at once, and the
-- interrupted attempt is not counted. Fenced like complete.sql. The NOTIFY wakes
-- the other workers so that they take the jobs over at once.
WITH released AS (
    UPDATE {schema}.jobs AS j
    SET status = 'pending',
        attempts = j.attempts - 1,
        run_at = now(),
        worker_id = NULL,
        lease_expires_at = NULL,
        started_at = NULL,
        updated_at = now()
    FROM unnest($1::bigint[], $2::integer[]) AS r(id, attempt)
    WHERE j.id = r.id
          AND j.attempts = r.attempt
      AND j.worker_id = $3
        RETURNING j.id, j.queue
)
SELECT id, pg_notify({channel}, queue) FROM released
