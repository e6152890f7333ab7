-- The dashboard's list: newest first, by the keyset cursor $6 (the last id of the
-- page before), filtered by state ($1), types ($2) and queues ($3) (NULL: any), and
-- created at or after $4 and before $5 (NULL: unbounded). $8 narrows pending jobs
-- by when they run: 'due' (run_at passed), 'scheduled' (due later, never tried),
-- 'retrying' (due later, after a failed attempt); NULL: any. The scan follows the
-- primary key downwards and stops at $7 rows: a filter that matches few of the newest
-- jobs reads further, never an OFFSET.
-- $9 is "now": NULL for the database's clock, a time for a test's (db/store.py).
SELECT *
FROM {schema}.jobs
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
ORDER BY id DESC
LIMIT $7
