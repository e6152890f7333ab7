-- The new-jobs NOTIFY says how early the earliest of them fell due, as well as their
-- queue: "<run_at in microseconds since the epoch> <queue>". A worker resumes its
-- claims where its last one ended (worker/producer.py), and this is how it learns
-- that a job was queued behind that point (a run_at in the past, a long transaction
-- that inserted rows with its start time) and it must look from the start again.
-- Other paths that make jobs pending send "* <queue>": look from the start.
CREATE OR REPLACE FUNCTION {schema}.notify_jobs_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '_jobs',
                      (extract(epoch FROM q.first_due) * 1000000)::bigint || ' ' || q.queue)
    FROM (SELECT queue, min(run_at) AS first_due
          FROM inserted WHERE run_at <= now() GROUP BY queue) AS q;
    RETURN NULL;
END;
$$;
