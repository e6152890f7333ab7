-- A page of jobs, newest first (GET /jobs, the dashboard, `jobqueue jobs list`), by the
-- keyset cursor $6 (the last id of the page before): never an OFFSET. Filtered by state
-- ($1), types ($2), queues ($3), created at or after $4 and before $5, tags ($10: all
-- of them), metadata ($11: an object it contains) and payload ($13) (NULL: any). $8
-- narrows pending jobs by when they run: 'due' (run_at passed), 'scheduled' (due later,
-- never tried), 'retrying' (due later, after a failed attempt); NULL: any. $9 is "now":
-- NULL for the database's clock, a time for a test's (db/store.py).
--
-- Run with a plan made for its values (plan_per_execution.sql): a NULL filter then
-- drops out of the plan.
--
-- Tags and metadata are read from job_labels (migration 0031), two ways. $14 false: the
-- jobs newest first along the primary key, each looked up in job_labels, a page and no
-- more: right for a value many jobs carry. $14 true: the ids of every job that carries
-- it, from the GIN indexes, then those jobs by their ids: right for a value few jobs
-- carry, where the first way reads until it has found a page, the whole table for a
-- value no job carries. The planner's guess of how many jobs carry a value it has no
-- statistics for is far off (half the rarest one it knows), so the caller counts them
-- first, up to a bound (job_labels_count.sql, model/search.py).
--
-- The payload has no index: a payload filter ($13) is applied to at most $12 jobs that
-- match the rest, newest first, and the row after those, numbered $12 + 1, comes back
-- whatever its payload, to say the scan stopped there (model/search.py). Up to $7 + 1 rows:
-- the one after the page says that there is a next page.
--
-- $12 is never NULL: without a payload filter it is $7, the page. The inner LIMIT is
-- what lets the planner read the primary key downwards and stop after a page. Without
-- it the window function's input is every matching row, so a common tag was read from
-- its index whole and sorted: 150 ms for a tag on 100,000 of a million jobs, against
-- 0.4 ms along the key (bench/search.py).
SELECT s.*
FROM (
    SELECT j.*, row_number() OVER (ORDER BY j.id DESC) AS scanned
    FROM (
        SELECT jobs.*
        FROM {schema}.jobs
        LEFT JOIN {schema}.job_labels AS l ON l.job_id = jobs.id
        WHERE ($1::text IS NULL OR status = $1)
          AND ($2::text[] IS NULL OR type = ANY($2))
          AND ($3::text[] IS NULL OR queue = ANY($3))
          AND ($4::timestamptz IS NULL OR created_at >= $4)
          AND ($5::timestamptz IS NULL OR created_at < $5)
          AND ($6::bigint IS NULL OR id < $6)
          AND CASE $8::text
                  WHEN 'due' THEN run_at <= COALESCE($9::timestamptz, now())
                  WHEN 'scheduled' THEN run_at > COALESCE($9::timestamptz, now()) AND attempts = 0
                  WHEN 'retrying' THEN run_at > COALESCE($9::timestamptz, now()) AND attempts > 0
                  ELSE true
              END
          AND ($10::text[] IS NULL OR l.tags @> $10)
          AND ($11::jsonb IS NULL OR l.meta @> $11)
          AND ($14::boolean IS NOT TRUE
               OR jobs.id = ANY(ARRAY(SELECT f.job_id FROM {schema}.job_labels AS f
                                      WHERE ($10::text[] IS NULL OR f.tags @> $10)
                                        AND ($11::jsonb IS NULL OR f.meta @> $11))))
        ORDER BY jobs.id DESC
        LIMIT $12::integer + 1
    ) AS j
) AS s
WHERE s.scanned > $12::integer OR $13::jsonb IS NULL OR s.payload @> $13
ORDER BY s.id DESC
LIMIT $7::integer + 1
