-- Cancellation: a pending job is cancelled at once; a running one is asked to stop,
-- which this column records until its worker ends it (or, if that worker is lost,
-- the rescuer does).
ALTER TABLE {schema}.jobs ADD COLUMN cancel_requested_at timestamptz;
