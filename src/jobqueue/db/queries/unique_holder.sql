-- The job that holds a unique key, if it still exists: the function of migration
-- 0016, so that an enqueue-only role, which cannot read stored jobs, gets it too.
SELECT * FROM {schema}.unique_holder($1)
