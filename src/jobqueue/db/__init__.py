"""Everything that talks to PostgreSQL: pool, queries, migrations, the embedded server."""
