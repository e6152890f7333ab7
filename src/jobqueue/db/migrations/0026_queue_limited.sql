-- Whether a queue has a limit shared by every worker (migration 0020), as one column
-- that the limits keep: the claims (claim.sql, complete_handoff.sql), the producer's
-- choice of claim (queue_limited.sql) and the limits' overview all read this fact, and
-- each wrote out its four columns before. Stored, so that reading it costs what
-- reading one of them did; the queues table is a row per queue, so the rewrite that
-- adding it takes is short.
ALTER TABLE {schema}.queues
    ADD COLUMN limited boolean NOT NULL GENERATED ALWAYS AS (
        global_limit IS NOT NULL OR key_limit IS NOT NULL
        OR rate_count IS NOT NULL OR key_rate_count IS NOT NULL
    ) STORED;
