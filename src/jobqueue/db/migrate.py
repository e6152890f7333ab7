"""Applies the numbered migration files, each exactly once, however many processes start at once."""

from __future__ import annotations

import asyncio
import contextlib
import random
import zlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from jobqueue.db.sql import Migration, migrations
from jobqueue.db.store import Store
from jobqueue.logs import get_logger

log = get_logger("jobqueue.migrate")

# A migration's statement waits this long for a lock, then gives up and the migration
# is tried again (JOBQUEUE_MIGRATION_LOCK_TIMEOUT); LOCK_ATTEMPTS times, pausing
# LOCK_PAUSE seconds, doubled each time up to LOCK_PAUSE_MAX, between them: about two
# minutes in all.
DEFAULT_LOCK_TIMEOUT = 1.0
LOCK_ATTEMPTS = 30
LOCK_PAUSE, LOCK_PAUSE_MAX = 0.05, 5.0
# How often a migration outside a transaction tries for the session's lock.
SESSION_LOCK_POLL = 0.1


class MigrationLockTimeout(Exception):
    """A migration could not get its locks; the message is one line for the user."""


def lock_key(schema: str) -> int:
    """A stable advisory-lock key per schema, so two schemas migrate independently."""
    return zlib.crc32(f"jobqueue.migrate.{schema}".encode())


async def migrate(
    conn: asyncpg.Connection,
    schema: str,
    *,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    found: Sequence[Migration] | None = None,
) -> list[int]:
    """Apply every migration not applied yet, in order; return the versions applied now.

    Each in a transaction of its own, under a lock of that transaction's: concurrent
    starters wait for it and then find it applied; a migration that fails is not
    applied, and those before it stay applied; and it holds through PgBouncer in
    transaction mode (no session needed). A statement that waits more than
    ``lock_timeout`` seconds for a lock gives up, and its migration is tried again
    after a pause, up to LOCK_ATTEMPTS times: queued behind a long transaction, an
    ALTER TABLE would hold up every enqueue and claim queued behind it. A migration
    marked NO_TRANSACTION (CREATE INDEX CONCURRENTLY) runs outside a transaction,
    under the session's lock. ``found``: the migrations to apply (default: this
    code's)."""
    store = Store(conn, schema)
    for create in (store.schema_create, store.migrations_create):
        await created_by_anyone(create)
    pending = _pending(migrations(schema) if found is None else found,
                       await store.migrations_applied())  # fmt: skip
    key, applied = lock_key(schema), []
    for migration in pending:
        if migration.transactional:
            done = await _in_transaction(conn, store, key, migration, lock_timeout)
        else:
            done = await _outside_transaction(conn, store, key, migration)
        if done:
            log.info("migration applied", version=migration.version, name=migration.name)
            applied.append(migration.version)
    return applied


def _pending(found: Sequence[Migration], done: set[int]) -> list[Migration]:
    # Read without the lock: an up-to-date schema, as at nearly every start, takes no
    # lock and one query. Each pending one is read again under the lock.
    return [migration for migration in found if migration.version not in done]


async def _in_transaction(
    conn: asyncpg.Connection, store: Store, key: int, migration: Migration, lock_timeout: float
) -> bool:
    """Apply ``migration`` in a transaction; False if another starter applied it."""
    for attempt in range(1, LOCK_ATTEMPTS + 1):
        try:
            async with conn.transaction():
                await store.migration_lock(key=key)
                if migration.version in await store.migrations_applied():
                    return False
                # After the wait for our own lock, which may be long and blocks no one.
                await store.migration_lock_timeout(seconds=lock_timeout)
                # A migration is a script of many statements, not a query of the store.
                await conn.execute(migration.sql)
                await store.migrations_record(version=migration.version, name=migration.name)
            return True
        # A deadlock: a wait for our lock, in this transaction, while another starter's
        # concurrent index build waits for this transaction to end. Ours gave way.
        except (asyncpg.LockNotAvailableError, asyncpg.DeadlockDetectedError) as exc:
            if attempt == LOCK_ATTEMPTS:
                raise MigrationLockTimeout(
                    f"migration {migration.version} ({migration.name}) waited more than "
                    f"{lock_timeout:g}s for a lock {LOCK_ATTEMPTS} times ({exc}): a long "
                    f"transaction holds it; run `jobqueue migrate` again once it has ended"
                ) from exc
            log.warning("migration gave up waiting for a lock; trying again",
                        version=migration.version, name=migration.name, attempt=attempt,
                        error=str(exc))  # fmt: skip
            pause = min(LOCK_PAUSE_MAX, LOCK_PAUSE * 2**attempt)
            await asyncio.sleep(pause * random.uniform(0.5, 1))  # starters apart
    raise AssertionError("unreachable")


async def _outside_transaction(
    conn: asyncpg.Connection, store: Store, key: int, migration: Migration
) -> bool:
    """Apply ``migration`` statement by statement, outside a transaction, under the
    session's migration lock; False if another starter applied it."""
    # Polled: the lock is another session's, which no event here tells of.
    while not await store.migration_session_lock(key=key):  # noqa: ASYNC110
        await asyncio.sleep(SESSION_LOCK_POLL)
    try:
        if migration.version in await store.migrations_applied():
            return False
        # First the leftovers of a build that died, which IF NOT EXISTS would keep.
        for statement in [*await store.migration_invalid_index_drops(), *migration.statements]:
            await conn.execute(statement)
        await store.migrations_record(version=migration.version, name=migration.name)
        return True
    finally:
        await store.migration_session_unlock(key=key)


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

# What the dry run says of a migration outside a transaction, which it does not try.
OUTSIDE_A_TRANSACTION = (
    "outside a transaction, statement by statement (CREATE INDEX CONCURRENTLY: "
    "ShareUpdateExclusiveLock, which blocks no reads or writes); not tried here"
)

# Left out of the listing: what a query reading a table takes, which waits only for
# locks that block reads.
QUIET = ("AccessShareLock",)


# A statement as the dry run shows it: its first line, cut short.
SHOWN = 96


async def dry_run(
    conn: asyncpg.Connection, schema: str, *, found: Sequence[Migration] | None = None
) -> list[tuple[Migration, list[tuple[str, list[str]]]]]:
    """Each pending migration with its statements that took locks on the schema's
    tables, indexes and sequences, and those locks (``mode on relation``, with what it
    blocks), found by applying them all, statement by statement, in one transaction
    that is then rolled back: nothing is changed. A relation's strongest lock is listed
    once, under the first statement to take it; locks on relations a migration created
    are left out, since nobody else can see those before the commit. ``migrate`` holds
    each migration's locks until that migration commits. A migration outside a
    transaction is not tried: what it does cannot be rolled back. ``found``: the
    migrations (default: this code's)."""
    store = Store(conn, schema)
    pending = _pending(
        migrations(schema) if found is None else found,
        {version for version, _, _ in (await status(conn, schema)).applied},
    )
    planned: list[tuple[Migration, list[tuple[str, list[str]]]]] = []
    tx = conn.transaction()
    await tx.start()
    try:
        existing = await store.migration_relations()
        await store.migration_lock(key=lock_key(schema))
        await store.schema_create()
        await store.migrations_create()
        held = await store.migration_locks(existing=existing)
        for migration in pending:
            if not migration.transactional:
                planned.append((migration, [("", [OUTSIDE_A_TRANSACTION])]))
                continue
            steps = []
            for statement in migration.statements:
                await conn.execute(statement)
                now = await store.migration_locks(existing=existing)
                taken = [
                    f"{mode} on {relation}" + (f" ({BLOCKS[mode]})" if mode in BLOCKS else "")
                    for relation, (mode, existed) in now.items()
                    if existed and mode not in QUIET and held.get(relation, ("", True))[0] != mode
                ]
                if taken:
                    steps.append((shown(statement), taken))
                held = now
            planned.append((migration, steps))
    finally:
        await tx.rollback()
    return planned


def shown(statement: str) -> str:
    first = " ".join(statement.split("\n", 1)[0].split())
    return first if len(first) <= SHOWN else first[: SHOWN - 3] + "..."
