-- Whether any job is running, or pending and due: a testing drain() goes on while so.
SELECT EXISTS (SELECT 1 FROM {schema}.jobs WHERE status = 'running')
    OR EXISTS (SELECT 1 FROM {schema}.jobs WHERE status = 'pending' AND run_at <= now())
