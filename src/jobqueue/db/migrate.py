"""Applies the numbered migration files, each exactly once, however many processes start at once."""

from __future__ import annotations

import zlib

import asyncpg
import structlog

from jobqueue.db.sql import migrations, queries

log = structlog.get_logger("jobqueue.migrate")


def lock_key(schema: str) -> int:
    """A stable advisory-lock key per schema, so two schemas migrate independently."""
    return zlib.crc32(f"jobqueue.migrate.{schema}".encode())


async def migrate(conn: asyncpg.Connection, schema: str) -> list[int]:
    """Apply every migration not applied yet; return the versions applied now."""
    q = queries(schema)
    key = lock_key(schema)
    # A session-level lock: it serialises concurrent starters across the
    # transactions below, and PostgreSQL drops it if this connection dies.
    await conn.execute(q.advisory_lock, key)
    try:
        await conn.execute(q.schema_create)
        await conn.execute(q.migrations_create)
        done = {row["version"] for row in await conn.fetch(q.migrations_applied)}
        applied = []
        for migration in migrations(schema):
            if migration.version in done:
                continue
            async with conn.transaction():
                await conn.execute(migration.sql)
                await conn.execute(q.migrations_record, migration.version, migration.name)
            log.info("migration applied", version=migration.version, name=migration.name)
            applied.append(migration.version)
        return applied
    finally:
        await conn.execute(q.advisory_unlock, key)
