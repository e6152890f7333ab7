"""The queue's database as one JobQueue holds it: where it is, and what is open on it.

The DSN is resolved once, starting (or joining) the embedded server when none is
configured; the JobQueue that started it stops it. An asyncpg pool belongs to the
event loop that opened it, so each loop gets its own pool, with the store, the
Enqueuer and the Waiter that run on it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self, TypeVar

import asyncpg

from jobqueue.config import Settings
from jobqueue.db.connections import AppConnection, executor_for
from jobqueue.db.embedded import EmbeddedPostgres
from jobqueue.db.migrate import SchemaStatus, dry_run, migrate, status
from jobqueue.db.pool import connect_session, create_pool, raises_unavailable, resolve_dsn
from jobqueue.db.query_base import Clock
from jobqueue.db.records import JobRow, UniqueKey
from jobqueue.db.sql import Migration
from jobqueue.db.store import Store
from jobqueue.enqueue.enqueuer import Enqueuer, insert, on_pool, opened
from jobqueue.model.job import Job
from jobqueue.sync_bridge import SyncBridge
from jobqueue.waiter import Waiter

if TYPE_CHECKING:
    from jobqueue.enqueue.idempotency import IdempotencyKey

T = TypeVar("T")

# Connections per process when JOBQUEUE_POOL_SIZE is auto and nothing chose fewer
# (`jobqueue worker` does: see cli/service.py). Handlers never use them: a worker
# needs four at once (producer, completer, heartbeat, leader), whatever its
# WORKER_COUNT, and the rest serve concurrent HTTP requests; more would mostly queue
# inside PostgreSQL.
POOL_SIZE = 16


@dataclass
class LoopResources:
    pool: asyncpg.Pool
    store: Store
    enqueuer: Enqueuer
    waiter: Waiter | None = None  # its LISTEN connection opens with the first wait


class Database:
    def __init__(self, settings: Settings, clock: Clock) -> None:
        self.settings = settings
        self._clock = clock
        self._dsn: str | None = None
        self._embedded: EmbeddedPostgres | None = None
        self._loops: dict[asyncio.AbstractEventLoop, LoopResources] = {}
        self._lock = threading.Lock()

    @property
    def dsn(self) -> str:
        """The database's DSN; resolving it may start the embedded server."""
        with self._lock:
            if self._dsn is None:
                self._dsn, self._embedded = resolve_dsn(
                    self.settings.database_url, self.settings.data_path
                )
            return self._dsn

    def use_dsn(self, dsn: str) -> None:
        """Use a DSN resolved elsewhere (the server process resolves it once)."""
        self._dsn = dsn

    @property
    def direct_dsn(self) -> str | None:
        """Where LISTEN goes: JOBQUEUE_DIRECT_DATABASE_URL, else the DSN; None when
        poll-only."""
        return self.settings.direct_dsn(self.dsn)

    async def resolved_direct_dsn(self) -> str | None:
        return self.settings.direct_dsn(await self.resolved_dsn())

    async def resolved_dsn(self) -> str:
        # Starting the embedded server blocks for up to a second: not on the event loop.
        return self._dsn if self._dsn is not None else await asyncio.to_thread(lambda: self.dsn)

    def current(self) -> LoopResources | None:
        """This event loop's pool and what runs on it, if open: what ``resources`` gives
        without a coroutine to make and await, for every enqueue."""
        return self._loops.get(asyncio.get_running_loop())

    async def resources(self) -> LoopResources:
        """This event loop's pool and what runs on it, opened on first use."""
        loop = asyncio.get_running_loop()
        found = self._loops.get(loop)
        if found is None:
            pool = await create_pool(
                await self.resolved_dsn(),
                max_size=self.settings.pool_size or POOL_SIZE,
                statement_timeout=self.settings.statement_timeout,
                pooler=self.settings.behind_pooler,
            )
            store = Store(pool, self.settings.schema, self._clock)
            found = self._loops[loop] = LoopResources(pool, store, Enqueuer(store))
        return found

    async def insert(
        self,
        row: JobRow,
        unique: UniqueKey | None,
        conn: AppConnection | None,
        idem: IdempotencyKey | None,
    ) -> tuple[Job, bool]:
        """The job stored (or the one its unique or idempotency key names) and whether
        it is new: one with a unique or idempotency key, or on the application's
        connection (a plain job on the pool, JobQueue hands to the Enqueuer itself)."""
        return await self.write(conn, lambda store: insert(store, row, unique, idem))

    async def write(self, conn: AppConnection | None, write: Callable[[Store], Awaitable[T]]) -> T:
        """``write`` on the application's connection, inside its transaction (its
        errors are its driver's), or on a pooled one under enqueue's error contract:
        EnqueueFailed or EnqueueOutcomeUnknown when the database cannot be reached."""
        store = (await opened(self.resources())).store
        if conn is None:
            return await on_pool(store, write)
        return await write(store.on(executor_for(conn)))

    async def waiter(self) -> Waiter:
        resources = await self.resources()
        if resources.waiter is None:
            direct = await self.resolved_direct_dsn()
            # Poll-only: no NOTIFY comes, so the fallback is the only way to notice.
            fallback = self.settings.poll_interval if direct is None else None
            resources.waiter = Waiter(resources.store, direct, fallback=fallback)
        return resources.waiter

    async def migrate(self) -> list[int]:
        # A connection of its own: a migration may outlast the pool's statement timeout.
        schema, timeout = self.settings.schema, self.settings.migration_lock_timeout
        return await self.on_session(lambda conn: migrate(conn, schema, lock_timeout=timeout))

    async def on_session(self, call: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """``call`` on a connection of its own (``session``), closed after."""
        conn = await self.session()
        try:
            return await call(conn)
        finally:
            await conn.close()

    async def session(self) -> asyncpg.Connection:
        """A connection of its own, to the direct session if there is one, else
        through the pooler."""
        dsn = await self.resolved_dsn()
        return await connect_session(self.settings.direct_dsn(dsn), dsn)

    async def close_loop(self, *, terminate: bool = False) -> None:
        """Close this event loop's pool; the next use opens a new one."""
        found = self._loops.pop(asyncio.get_running_loop(), None)
        if found is None:
            return
        if found.waiter is not None:
            await found.waiter.close()
        await found.enqueuer.close()
        if terminate:
            found.pool.terminate()
        else:
            await found.pool.close()

    @property
    def open_loops(self) -> int:
        return len(self._loops)

    def stop_embedded(self) -> None:
        """Stop the embedded server if this process started it; forget its address too,
        so that a later use starts (or joins) a server again."""
        with self._lock:
            embedded, self._embedded, self._dsn = self._embedded, None, None
        if embedded is not None:
            embedded.stop()

    @property
    def owns_embedded(self) -> bool:
        return self._embedded is not None


class Connected:
    """The connection half of a JobQueue: its database, with a pool per event loop,
    the sync API's loop, and the clock its queries take as now."""

    def __init__(self, settings: Settings) -> None:
        # The time the queries take as now: the database's, unless a test sets it.
        self.clock = Clock()
        self._database = Database(settings, self.clock)
        self._sync = SyncBridge(self.close_pool)

    @property
    def dsn(self) -> str:
        """The database's DSN; resolving it may start the embedded server."""
        return self._database.dsn

    @property
    def direct_dsn(self) -> str | None:
        """Where LISTEN connects: JOBQUEUE_DIRECT_DATABASE_URL, else the DSN; None when
        poll-only (JOBQUEUE_DIRECT_DATABASE_URL=none)."""
        return self._database.direct_dsn

    def use_dsn(self, dsn: str) -> None:
        """Use a DSN resolved elsewhere (the server process resolves it once)."""
        self._database.use_dsn(dsn)

    @raises_unavailable
    async def pool(self) -> asyncpg.Pool:
        """This event loop's pool, opened on first use."""
        return (await self._database.resources()).pool

    @raises_unavailable
    async def store(self) -> Store:
        """This event loop's store: every query, as a typed method (jobqueue.db.store)."""
        return (await self._database.resources()).store

    @raises_unavailable
    async def migrate(self) -> list[int]:
        """Apply the schema; returns the migration versions applied now."""
        return await self._database.migrate()

    @raises_unavailable
    async def schema_status(self) -> SchemaStatus:
        """The migrations applied and those pending (``jobqueue migrate --status``)."""
        schema = self._database.settings.schema
        return await self._database.on_session(lambda conn: status(conn, schema))

    @raises_unavailable
    async def migrate_dry_run(self) -> list[tuple[Migration, list[tuple[str, list[str]]]]]:
        """The pending migrations, each with its statements that take locks and those
        locks, applied and rolled back."""
        schema = self._database.settings.schema
        return await self._database.on_session(lambda conn: dry_run(conn, schema))

    @raises_unavailable
    async def ping(self) -> None:
        """One round trip to the database (raises if it cannot be reached)."""
        await (await self.store()).ping()

    @raises_unavailable
    async def close_pool(self, *, terminate: bool = False) -> None:
        """Close this event loop's pool; the next use opens a new one. ``terminate``
        drops the connections at once (the database is gone: nothing to say goodbye to).
        """
        await self._database.close_loop(terminate=terminate)

    @raises_unavailable
    async def close(self) -> None:
        """Close this loop's pool (and the sync API's), and stop an embedded server we own."""
        await self.close_pool()
        self._sync.close()
        if not self._database.open_loops and self._database.owns_embedded:
            await asyncio.to_thread(self._database.stop_embedded)

    async def __aenter__(self) -> Self:
        await self.pool()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
