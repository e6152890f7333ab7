-- How many jobs in the states $1 match the filters ($2 types, $3 queues; NULL: any),
-- counting no further than $4: the confirmation of a bulk action shows "over N" past
-- that, rather than counting millions of rows.
SELECT count(*)
FROM (
    SELECT 1
    FROM {schema}.jobs
    WHERE status = ANY($1::text[])
      AND ($2::text[] IS NULL OR type = ANY($2))
      AND ($3::text[] IS NULL OR queue = ANY($3))
    LIMIT $4
) AS matched
