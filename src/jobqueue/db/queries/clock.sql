-- The database's clock, so that times compare with the rows' (jobqueue.testing).
SELECT now()
