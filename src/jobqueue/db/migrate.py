"""Applies the numbered migration files, each exactly once, however many processes start at once."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Awaitable, Callable

import asyncpg

from jobqueue.db.sql import migrations
from jobqueue.db.store import Store
from jobqueue.logs import get_logger

log = get_logger("jobqueue.migrate")


def lock_key(schema: str) -> int:
    """A stable advisory-lock key per schema, so two schemas migrate independently."""
    return zlib.crc32(f"jobqueue.migrate.{schema}".encode())


async def migrate(conn: asyncpg.Connection, schema: str) -> list[int]:
    """Apply every migration not applied yet; return the versions applied now.

    All of them in one transaction, under a lock of that transaction's: concurrent
    starters wait for it and then find the migrations applied, a failure applies
    none, and it holds through PgBouncer in transaction mode (no session needed)."""
    store = Store(conn, schema)
    for create in (store.schema_create, store.migrations_create):
        await created_by_anyone(create)
    applied = []
    async with conn.transaction():
        await store.migration_lock(key=lock_key(schema))
        # Read after the wait: what a starter ahead of this one applied is seen.
        done = await store.migrations_applied()
        for migration in migrations(schema):
            if migration.version in done:
                continue
            # A migration is a script of many statements, not a query of the store.
            await conn.execute(migration.sql)
            await store.migrations_record(version=migration.version, name=migration.name)
            applied.append(migration)
    for migration in applied:
        log.info("migration applied", version=migration.version, name=migration.name)
    return [migration.version for migration in applied]


async def created_by_anyone(create: Callable[[], Awaitable[None]]) -> None:
    """``create()``, an "IF NOT EXISTS" statement, where another starter may be creating
    the same: the loser of that race fails (on a catalog's unique index, or finding the
    schema, the table or its row type) once the winner has committed, so the object
    exists either way. (Taking the lock first would not help: after waiting for it, a
    transaction's catalog lookups may not see the winner's object yet, and fail the
    same way.)"""
    with contextlib.suppress(
        asyncpg.UniqueViolationError,  # on a catalog's index
        asyncpg.DuplicateSchemaError,
        asyncpg.DuplicateTableError,
        asyncpg.DuplicateObjectError,  # the table's row type, found first
    ):
        await create()
