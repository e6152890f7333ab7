-- Snoozes (docs/lifecycle.md#snooze): a handler that cannot run yet asks to run again
-- later without spending an attempt. snoozes counts them, so that an endless snooze
-- ends as a failure at JOBQUEUE_MAX_SNOOZES. A constant default: no table rewrite.
ALTER TABLE {schema}.jobs ADD COLUMN snoozes integer NOT NULL DEFAULT 0;
