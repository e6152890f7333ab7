-- Which of the queues $1 have a limit shared by every worker (docs/limits.md), and
-- whether it has a rate: a producer claims those through limit_lock.sql and
-- claim_limited.sql, and the others through claim.sql, which takes no lock. Read
-- once per poll interval.
SELECT name, rate_count IS NOT NULL AS rated
FROM {schema}.queues
WHERE name = ANY($1::text[]) AND limited
