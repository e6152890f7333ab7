-- Whether autovacuum reaches the schema's tables (docs/retention.md#vacuum), read by a
-- new maintenance leader: the server's switch (autovacuum needs track_counts too), and
-- the tables that turn it off for themselves (autovacuum_enabled = false).
SELECT current_setting('autovacuum')::bool AND current_setting('track_counts')::bool
         AS server_on,
       coalesce(array_agg(c.relname::text ORDER BY c.relname) FILTER (
         WHERE EXISTS (SELECT 1 FROM pg_options_to_table(c.reloptions) AS o
                       WHERE o.option_name = 'autovacuum_enabled'
                         AND NOT o.option_value::bool)
       ), '{}') AS tables_off
FROM pg_class AS c
WHERE c.relnamespace = to_regnamespace('{schema}') AND c.relkind = 'r'
