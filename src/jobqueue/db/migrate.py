"""Applies the numbered migration files, each exactly once, however many processes start at once."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from jobqueue.db.sql import Migration, migrations
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


@dataclass(frozen=True)
class SchemaStatus:
    """What ``jobqueue migrate --status`` shows: each applied migration (version, name,
    when) and those this code has that the database has not."""

    applied: list[tuple[int, str, datetime]]
    pending: list[Migration]

    @property
    def version(self) -> int:
        """The last migration applied (0: none)."""
        return self.applied[-1][0] if self.applied else 0


async def status(conn: asyncpg.Connection, schema: str) -> SchemaStatus:
    try:
        applied = await Store(conn, schema).migrations_list()
    except (asyncpg.UndefinedTableError, asyncpg.InvalidSchemaNameError):
        applied = []
    done = {version for version, _, _ in applied}
    return SchemaStatus(applied, [m for m in migrations(schema) if m.version not in done])


def code_version() -> int:
    """The last migration this code carries: the schema it needs."""
    return migrations("jobqueue")[-1].version


# What a lock mode held until the migration's transaction commits stops meanwhile.
BLOCKS = {
    "AccessExclusiveLock": "blocks reads and writes",
    "ExclusiveLock": "blocks writes",
    "ShareRowExclusiveLock": "blocks writes",
    "ShareLock": "blocks writes",
}

# Left out of the listing: what a query reading a table takes, which waits only for
# locks that block reads.
QUIET = ("AccessShareLock",)


async def dry_run(conn: asyncpg.Connection, schema: str) -> list[tuple[Migration, list[str]]]:
    """Each pending migration with the locks it took on the schema's tables, indexes
    and sequences (``mode on relation``, with what it blocks), found by applying them
    all, in order, in one transaction that is then rolled back, as ``migrate`` applies
    them: nothing is changed. A relation's strongest lock is listed once, under the
    first migration to take it; locks on relations a migration created are left out,
    since nobody else can see those before the commit. The locks are held until the
    whole transaction commits, so the longest wait is the whole ``migrate``."""
    store = Store(conn, schema)
    pending = (await status(conn, schema)).pending
    found: list[tuple[Migration, list[str]]] = []
    tx = conn.transaction()
    await tx.start()
    try:
        existing = await store.migration_relations()
        await store.migration_lock(key=lock_key(schema))
        await store.schema_create()
        await store.migrations_create()
        held = await store.migration_locks(existing=existing)
        for migration in pending:
            await conn.execute(migration.sql)
            now = await store.migration_locks(existing=existing)
            taken = [
                f"{mode} on {relation}" + (f" ({BLOCKS[mode]})" if mode in BLOCKS else "")
                for relation, (mode, existed) in now.items()
                if existed and mode not in QUIET and held.get(relation, ("", True))[0] != mode
            ]
            found.append((migration, taken))
            held = now
    finally:
        await tx.rollback()
    return found
