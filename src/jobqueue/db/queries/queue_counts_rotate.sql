-- Empties the counters' idle partition if it holds more than $1 pages and no rows
-- (migration 0025); the seconds left in this turn if the other one has grown too.
SELECT {schema}.queue_counts_rotate($1)
