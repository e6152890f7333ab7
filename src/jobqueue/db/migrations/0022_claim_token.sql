-- A claim's own token, which every write about the claimed job names besides its attempt
-- and worker (the fence).
--
-- A claim's commit does not wait for its WAL to reach the disk (claim.sql): a database
-- crash can forget a claim made in the last moments before it, and the job is pending
-- again, with the attempt count it had. Claimed again, by the same worker, it would
-- carry the same attempt number and worker id as the run the forgotten claim started:
-- that run, still going, could then write its outcome over the new claim's. A random
-- token per claim tells the two apart; a forgotten claim's token is never written again.
ALTER TABLE {schema}.jobs ADD COLUMN claim_token bigint;
