-- The strongest lock this session holds on each table, index and sequence outside the
-- catalogs (jobqueue migrate --dry-run applies the pending migrations in a transaction
-- it rolls back, and reads what each took), with whether the relation existed before
-- that transaction began: $1, the oids that did (locks on a relation the migration
-- created itself block nobody).
SELECT l.relation::regclass::text AS relation,
       (array_agg(l.mode ORDER BY array_position(ARRAY[
           'AccessShareLock', 'RowShareLock', 'RowExclusiveLock', 'ShareUpdateExclusiveLock',
           'ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock'],
           l.mode) DESC))[1] AS mode,
       l.relation = ANY($1::oid[]) AS existed
FROM pg_locks AS l
JOIN pg_class AS c ON c.oid = l.relation
WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation' AND l.granted
  AND c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace,
                             'pg_toast'::regnamespace)
GROUP BY l.relation
ORDER BY 1
