-- How many seconds from now until rate-limited queue $1 may start a job again: its
-- rate_count-th most recent start plus its period (a claim counts the starts in the
-- period that ends at it), or NULL if it may now (or has no rate). A producer that
-- found the queue at its rate sleeps until then rather than until its next poll.
-- $2 is "now": NULL for the database's clock, a time for a test's (db/store.py).
SELECT extract(epoch FROM s.at + q.rate_period - COALESCE($2::timestamptz, clock_timestamp()))::float8
FROM {schema}.queue_starts AS s
JOIN {schema}.queues AS q ON q.name = s.queue
WHERE s.queue = $1 AND q.rate_count IS NOT NULL
ORDER BY s.at DESC
OFFSET (SELECT rate_count - 1 FROM {schema}.queues WHERE name = $1)
LIMIT 1
