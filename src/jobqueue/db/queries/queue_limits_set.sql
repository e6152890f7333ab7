-- Sets some of queue $1's limits ($2: {"column": value or null, ...}, the columns of
-- migration 0020 that change; rate periods in seconds) and keeps the others; the
-- queue need have no jobs. Workers claim by the new limits from their next claim of
-- a queue they already knew to be limited, else within one poll interval; the
-- NOTIFY wakes them, for a limit that was raised. Returns the limits as stored.
-- $3 is "now": NULL for the database's clock, a time for a test's (db/store.py).
INSERT INTO {schema}.queues AS q
    (name, global_limit, key_limit, rate_count, rate_period, key_rate_count, key_rate_period)
VALUES ($1, ($2::jsonb ->> 'global_limit')::integer, ($2::jsonb ->> 'key_limit')::integer,
        ($2::jsonb ->> 'rate_count')::integer,
        make_interval(secs => ($2::jsonb ->> 'rate_period')::float8),
        ($2::jsonb ->> 'key_rate_count')::integer,
        make_interval(secs => ($2::jsonb ->> 'key_rate_period')::float8))
ON CONFLICT (name) DO UPDATE SET
    global_limit = CASE WHEN $2::jsonb ? 'global_limit' THEN excluded.global_limit
                        ELSE q.global_limit END,
    key_limit = CASE WHEN $2::jsonb ? 'key_limit' THEN excluded.key_limit ELSE q.key_limit END,
    rate_count = CASE WHEN $2::jsonb ? 'rate_count' THEN excluded.rate_count ELSE q.rate_count END,
    rate_period = CASE WHEN $2::jsonb ? 'rate_period' THEN excluded.rate_period
                       ELSE q.rate_period END,
    key_rate_count = CASE WHEN $2::jsonb ? 'key_rate_count' THEN excluded.key_rate_count
                          ELSE q.key_rate_count END,
    key_rate_period = CASE WHEN $2::jsonb ? 'key_rate_period' THEN excluded.key_rate_period
                           ELSE q.key_rate_period END,
    updated_at = COALESCE($3::timestamptz, now())
RETURNING name, pg_notify({channel}, '* ' || name) AS notified
