-- The names of the schema's tables, for `jobqueue grants`: it grants on those that exist.
SELECT c.relname::text AS name
FROM pg_class AS c
WHERE c.relnamespace = to_regnamespace('{schema}') AND c.relkind IN ('r', 'p')
ORDER BY c.relname
