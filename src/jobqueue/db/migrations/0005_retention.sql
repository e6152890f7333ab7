-- Finding the finished jobs past their retention, oldest first, without reading
-- the live ones.
CREATE INDEX jobs_finished_idx ON {schema}.jobs (finished_at)
    WHERE status IN ('completed', 'failed', 'cancelled');

-- A queue table turns over all of its rows: each job is inserted, updated two or
-- three times, then deleted. PostgreSQL's defaults wait for 20% of the table to be
-- dead before vacuuming, which on ten million rows is two million dead tuples in
-- the claim path's indexes. Vacuum (and refresh the statistics) after 2% instead,
-- or 1,000 rows on a small table, and let each run do more work before it pauses.
ALTER TABLE {schema}.jobs SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_limit = 1000
);
