"""Every query is prepared against a freshly migrated schema (a renamed column fails here,
not in production), and migrations apply once however many processes start together."""

from __future__ import annotations

import asyncio
from importlib import resources

import asyncpg
import pytest

from jobqueue.db.migrate import migrate
from jobqueue.db.sql import QUERY_NAMES, migrations, queries

pytestmark = pytest.mark.anyio


def test_every_query_file_is_loaded() -> None:
    files = {
        f.name.removesuffix(".sql")
        for f in (resources.files("jobqueue.db") / "queries").iterdir()
        if f.name.endswith(".sql")
    }
    assert files == set(QUERY_NAMES)


async def test_every_query_prepares(db: asyncpg.Connection, schema: str) -> None:
    q = queries(schema)
    for name in QUERY_NAMES:
        try:
            await db.prepare(getattr(q, name))
        except asyncpg.PostgresError as exc:  # pragma: no cover - the failure message
            pytest.fail(f"query {name}.sql does not prepare: {exc}")


async def test_migrations_apply_once_under_concurrent_starts(pg_dsn: str) -> None:
    schema = "t_concurrent_migrate"
    conns = [await asyncpg.connect(pg_dsn) for _ in range(10)]
    try:
        await conns[0].execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        applied = await asyncio.gather(*(migrate(c, schema) for c in conns))
        assert sorted(v for versions in applied for v in versions) == [
            m.version for m in migrations(schema)
        ]
        rows = await conns[0].fetch(f'SELECT version FROM "{schema}".jobqueue_migrations')
        assert len(rows) == len(migrations(schema))
        assert await migrate(conns[0], schema) == []
    finally:
        await conns[0].execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        for c in conns:
            await c.close()


async def test_claim_reads_the_pending_index_not_finished_jobs(
    db: asyncpg.Connection, schema: str
) -> None:
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type, status, finished_at)
            SELECT 'noop', 'completed', now() FROM generate_series(1, 20000)"""
    )
    await db.execute(f'ANALYZE "{schema}".jobs')
    rows = await db.fetch("EXPLAIN " + queries(schema).claim, "default", 10, "w", 30.0)
    plan = "\n".join(r[0] for r in rows)
    assert "jobs_claim_idx" in plan, plan
    assert "Seq Scan" not in plan, plan


@pytest.mark.parametrize(
    ("name", "types"),
    [
        ("claim", "text, integer, text, float8"),
        ("complete", "bigint[], integer[], text"),
        ("fail", "bigint[], integer[], text[], float8[], text"),
        ("release", "bigint[], integer[], text"),
    ],
)
async def test_generic_plans_look_jobs_up_by_index(
    db: asyncpg.Connection, schema: str, name: str, types: str
) -> None:
    """Prepared statements switch to a generic plan after a few runs; it must not scan
    the table, whose size grows with every finished job kept."""
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type, status, finished_at)
            SELECT 'noop', 'completed', now() FROM generate_series(1, 20000)"""
    )
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type) SELECT 'noop' FROM generate_series(1, 50000)"""
    )
    await db.execute(f'ANALYZE "{schema}".jobs')
    await db.execute("SET plan_cache_mode = force_generic_plan")
    sql = getattr(queries(schema), name)
    for cast in ("::bigint[]", "::integer[]", "::text[]", "::float8[]"):
        sql = sql.replace(f"unnest($1{cast}", "unnest($1").replace(f", $2{cast}", ", $2")
    await db.execute(f"PREPARE plan_test({types}) AS {sql}")
    nulls = ", ".join("NULL" for _ in types.split(","))
    rows = await db.fetch(f"EXPLAIN EXECUTE plan_test({nulls})")
    plan = "\n".join(r[0] for r in rows)
    assert "Seq Scan on jobs" not in plan, plan
    assert "Index Scan using jobs_pkey" in plan, plan
