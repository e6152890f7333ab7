-- The first $2 pending jobs of queue $1, as workers will take them: the due ones in
-- claim order (priority, run_at, id), then those due later by run_at. Each distinct
-- pending priority (found as queues_overview.sql finds them) gives its first $2 due
-- and first $2 later jobs through the claim index, so the cost grows with the
-- priorities in use, not with the backlog.
-- $3 is "now": NULL for the database's clock, a time for a test's (db/store.py).
WITH RECURSIVE priorities (p) AS (
    (SELECT priority FROM {schema}.jobs
     WHERE status = 'pending' AND queue = $1
     ORDER BY priority LIMIT 1)
    UNION ALL
    SELECT (SELECT priority FROM {schema}.jobs
            WHERE status = 'pending' AND queue = $1 AND priority > priorities.p
            ORDER BY priority LIMIT 1)
    FROM priorities WHERE priorities.p IS NOT NULL
), found AS (
    SELECT d.*
    FROM priorities
    CROSS JOIN LATERAL (
        SELECT * FROM {schema}.jobs
        WHERE status = 'pending' AND queue = $1 AND priority = priorities.p
          AND run_at <= COALESCE($3::timestamptz, now())
        ORDER BY run_at, id LIMIT $2
    ) AS d
    WHERE priorities.p IS NOT NULL
    UNION ALL
    SELECT l.*
    FROM priorities
    CROSS JOIN LATERAL (
        SELECT * FROM {schema}.jobs
        WHERE status = 'pending' AND queue = $1 AND priority = priorities.p
          AND run_at > COALESCE($3::timestamptz, now())
        ORDER BY run_at, id LIMIT $2
    ) AS l
    WHERE priorities.p IS NOT NULL
)
SELECT *
FROM found
ORDER BY run_at > COALESCE($3::timestamptz, now()),
         CASE WHEN run_at <= COALESCE($3::timestamptz, now()) THEN priority END,
         run_at, id
LIMIT $2
