-- How long ($1, e.g. '1000ms') a statement of this migration's transaction may wait for
-- a lock before it gives up (SET LOCAL): while an ALTER TABLE waits for its lock, every
-- enqueue and claim queued behind it waits too.
SELECT set_config('lock_timeout', $1, true)
