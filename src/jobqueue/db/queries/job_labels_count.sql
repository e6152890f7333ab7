-- How many jobs carry all the tags $1 and whose metadata contains $2 (NULL: any), up to
-- $3: the search's choice between its two ways to read (jobs_search.sql's $14). Read
-- from the GIN indexes of job_labels (migration 0031); planned per execution.
SELECT count(*)
FROM (
    SELECT 1
    FROM {schema}.job_labels
    WHERE ($1::text[] IS NULL OR tags @> $1)
      AND ($2::jsonb IS NULL OR meta @> $2)
    LIMIT $3::integer
) AS labelled
