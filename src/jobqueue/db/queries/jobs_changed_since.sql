-- Jobs changed at or after $1, by id (what a testing drain() ran).
SELECT * FROM {schema}.jobs WHERE updated_at >= $1 ORDER BY id
