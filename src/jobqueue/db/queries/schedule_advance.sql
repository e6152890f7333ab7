-- Due schedules' ticks enqueued, in one statement for a round of them: each one's next
-- tick, and the last tick and job it enqueued (NULL keeps them: every missed tick of it
-- was skipped).
UPDATE {schema}.schedules s
SET next_run_at = n.next_run_at, last_run_at = COALESCE(n.last_run_at, s.last_run_at),
    last_job_id = COALESCE(n.last_job_id, s.last_job_id)
FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::bigint[])
     AS n(name, next_run_at, last_run_at, last_job_id)
WHERE s.name = n.name
