-- The first statement of a claim of a limited queue ($1), in the claim's
-- transaction: it waits for the claim of that queue before it to commit. It must be
-- a statement of its own: in READ COMMITTED a statement's snapshot is taken before
-- it waits for a lock, so a statement that locked the row and counted the running
-- jobs too would not see the jobs the claim before it had just started.
-- claim_limited.sql, the next statement, counts in a snapshot taken after the wait.
SELECT name FROM {schema}.queues WHERE name = $1 FOR NO KEY UPDATE
