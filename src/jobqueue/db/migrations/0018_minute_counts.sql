-- The dashboard's per-minute counts (migration 0017) come from the counter changes
-- instead of the finished jobs: each change is stamped with its transaction's time,
-- and the leader's fold (queue_counts_fold.sql) adds the jobs it saw complete and
-- fail to their minute's row as it folds. No query reads the finished jobs to count
-- them. The waits still come from those jobs, but from a sample of at most a few
-- thousand a minute (queue_minutes_waits.sql); waited says that a minute's sample
-- was taken, found or not (its jobs may be gone to retention).
-- now() is stable, so the new column takes no rewrite of the table.
ALTER TABLE {schema}.queue_count_changes ADD COLUMN at timestamptz NOT NULL DEFAULT now();
ALTER TABLE {schema}.queue_minutes ADD COLUMN waited boolean NOT NULL DEFAULT false;
UPDATE {schema}.queue_minutes SET waited = true;
