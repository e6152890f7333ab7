"""Applies the numbered migration files, each exactly once, however many processes start at once."""

from __future__ import annotations

import zlib

import asyncpg
import structlog

from jobqueue.db.sql import migrations
from jobqueue.db.store import Store

log = structlog.get_logger("jobqueue.migrate")


def lock_key(schema: str) -> int:
    """A stable advisory-lock key per schema, so two schemas migrate independently."""
    return zlib.crc32(f"jobqueue.migrate.{schema}".encode())


async def migrate(conn: asyncpg.Connection, schema: str) -> list[int]:
    """Apply every migration not applied yet; return the versions applied now."""
    store = Store(conn, schema)
    key = lock_key(schema)
    # A session-level lock: it serialises concurrent starters across the
    # transactions below, and PostgreSQL drops it if this connection dies.
    await store.advisory_lock(key=key)
    try:
        await store.schema_create()
        await store.migrations_create()
        done = await store.migrations_applied()
        applied = []
        for migration in migrations(schema):
            if migration.version in done:
                continue
            async with conn.transaction():
                # A migration is a script of many statements, not a query of the store.
                await conn.execute(migration.sql)
                await store.migrations_record(version=migration.version, name=migration.name)
            log.info("migration applied", version=migration.version, name=migration.name)
            applied.append(migration.version)
        return applied
    finally:
        await store.advisory_unlock(key=key)
