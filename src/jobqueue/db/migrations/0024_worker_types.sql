-- Workers claim only the job types they have handlers for (claim.sql), and say which
-- when they register, so that a job no live worker can run is seen waiting for a
-- handler (GET /queues, jobqueue_jobs_unhandled) and `jobqueue enqueue` can refuse a
-- type nobody runs.
--
-- types: the types the worker has handlers for; NULL for a worker of a version before
-- this migration, which never said. any_type: it claims jobs of every type, failing
-- those it has no handler for (`--claim-any-type`); true by default, since that is
-- what a worker that does not say does.
ALTER TABLE {schema}.workers ADD COLUMN types text[];
ALTER TABLE {schema}.workers ADD COLUMN any_type boolean NOT NULL DEFAULT true;
