-- For the rest of this transaction, plan each statement for the values it is given
-- rather than reuse a generic plan (jobs_search.sql says why). SET LOCAL in a function,
-- so that it can be prepared as the store's other queries are.
SELECT set_config('plan_cache_mode', 'force_custom_plan', true)
