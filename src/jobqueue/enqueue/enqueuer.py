"""Storing new jobs: concurrent ``enqueue()`` calls share one INSERT (the Enqueuer),
and a job with a unique key is stored unless its key is held (``insert_unique``).

Concurrent calls share one INSERT, so one commit.

Every commit waits for a WAL flush, and a flush costs about as much for 100 rows
as for one. So the enqueuer does what PostgreSQL's group commit does, one step
earlier. A call that finds no INSERT running runs its own at once, with no task
or future, so a lone caller pays nothing for the sharing. Calls that arrive
meanwhile queue, and up to ``MAX_IN_FLIGHT`` INSERTs each take all that queued.
On 2 cores, 16 concurrent callers go from about 5,000 to about 20,000 jobs/s.

Each call keeps its own promise: it returns once its row is committed. When a
shared INSERT fails for a reason other than the database being unreachable, each
of its rows is tried again alone, so an error reaches only the call that caused it.

The database being unreachable is one of two errors (jobqueue.model.errors), decided by
``on_pool``: EnqueueFailed when nothing was stored, EnqueueOutcomeUnknown when the
connection died after the INSERT was sent. Only a statement that provably never
reached the server is tried again; one whose fate is unknown never is.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import asyncpg

from jobqueue.db.pool import KeptConnection, error_text, is_unavailable, never_sent
from jobqueue.db.records import JobRow, UniqueKey
from jobqueue.db.store import Store
from jobqueue.enqueue.idempotency import IdempotencyKey, remembered_insert
from jobqueue.enqueue.rows import Batch
from jobqueue.model.errors import EnqueueError, EnqueueFailed, EnqueueOutcomeUnknown
from jobqueue.model.job import Job

T = TypeVar("T")

# INSERTs running at once. One would make every caller wait for the flush before
# its own; a few let PostgreSQL overlap them. More only spreads callers thinner.
MAX_IN_FLIGHT = 4
# Rows per INSERT: bounds the statement, and the wait of the callers at its end.
MAX_BATCH = 1000
# Rounds of "take the key, else read its holder" before giving up (see insert_unique).
UNIQUE_ATTEMPTS = 5
# Tries at getting a connection before EnqueueFailed, waiting CONNECT_BACKOFF s after
# the first failure and twice as long after each next: 0.05 + 0.1 + 0.2 s, so that a
# call rides over a restart's last moments or a burst of killed connections, and a
# caller hears of a real outage within a second (plus the connect timeout of each try).
CONNECT_ATTEMPTS = 4
CONNECT_BACKOFF = 0.05

Pending = tuple[JobRow, "asyncio.Future[Job]"]


async def on_pool(
    store: Store, write: Callable[[Store], Awaitable[T]], kept: KeptConnection | None = None
) -> T:
    """``write`` run on one connection of ``store``'s pool, under enqueue's error
    contract: its result; EnqueueFailed if nothing was stored; EnqueueOutcomeUnknown
    if the connection died once a statement was sent; any other error as it is.
    ``kept``: where to take the connection from and give it back to (the Enqueuer's,
    kept across back-to-back enqueues), else the pool.

    Tried again only while nothing reached the server: no connection could be had (a
    few times, backing off), or the one had was dead before sending (at once: asyncpg
    closed it, and the next is another; every one of the pool may be dead). Tried from
    the start: ``write`` stores nothing before its last statement (a unique key's
    holder is read only after an INSERT that stored nothing).
    """
    pool = store.pool
    connections = kept or KeptConnection(pool)
    connect_failures = stale = 0
    while True:
        try:
            conn = await connections.take()
        except Exception as exc:
            if not is_unavailable(exc):
                raise
            connect_failures += 1
            # A timeout has waited long enough already (CONNECT_TIMEOUT).
            if connect_failures == CONNECT_ATTEMPTS or isinstance(exc, TimeoutError):
                raise EnqueueFailed(f"nothing stored: {error_text(exc)}") from exc
            await asyncio.sleep(CONNECT_BACKOFF * 2 ** (connect_failures - 1))
            continue
        try:
            result = await write(store.on(conn))
        except BaseException as exc:
            with contextlib.suppress(Exception):  # a broken connection is closed, not reused
                await connections.give(conn, keep=False)
            # EnqueueError: a write that knows what it stored (a transaction's, see
            # idempotency). A value the driver cannot encode is an InterfaceError too,
            # but no outage.
            if (
                isinstance(exc, EnqueueError | ValueError)
                or not isinstance(exc, Exception)
                or not is_unavailable(exc)
            ):
                raise
            if never_sent(exc) and stale < pool.get_max_size():
                stale += 1
                continue
            raise sent_failure(exc) from exc
        await connections.give(conn, keep=kept is not None)
        return result


async def opened(resources: Awaitable[T]) -> T:
    """The pool or store an enqueue runs on, opened on first use: an outage while
    opening it stored nothing."""
    try:
        return await resources
    except Exception as exc:
        if not is_unavailable(exc):
            raise
        raise EnqueueFailed(f"nothing stored: {error_text(exc)}") from exc


def sent_failure(exc: BaseException) -> EnqueueError:
    """The outage error of a statement that may have reached the server."""
    if never_sent(exc):
        return EnqueueFailed(f"nothing stored: {error_text(exc)}")
    if isinstance(exc, asyncpg.QueryCanceledError):
        # The server cancelled it (statement_timeout) and rolled it back.
        return EnqueueFailed(f"nothing stored: {error_text(exc)}")
    return EnqueueOutcomeUnknown(
        f"the connection was lost after the job was sent; it may or may not be stored "
        f"(retry with a unique_key to be sure): {error_text(exc)}"
    )


async def insert(
    store: Store,
    row: JobRow,
    unique: UniqueKey | None,
    idem: IdempotencyKey | None = None,
) -> tuple[Job, bool]:
    """Store one job on ``store``'s connection (the application's, in its transaction,
    or a pooled one); return it and whether it is new (False: its unique key's holder,
    as it was or replaced, or the job its idempotency key ``idem`` names)."""
    if idem is not None:
        return await remembered_insert(store, idem, lambda store: insert(store, row, unique))
    if unique is None:
        return await store.enqueue(row=row), True
    if unique.on_conflict in ("replace", "debounce"):
        return await store.enqueue_unique_replacing(
            row=row, unique_key=unique.key, hold_seconds=unique.hold,
            debounce=unique.on_conflict == "debounce",
        )  # fmt: skip
    return await insert_unique(store, row, unique.key, unique.hold)


async def insert_many(store: Store, batch: Batch, trace: str | None) -> tuple[list[int], int]:
    """``enqueue_many``'s jobs: one statement for all, or, where some have unique keys,
    as ``insert_batch`` stores them. Their ids, and how many were stored (not those
    whose unique key was taken)."""
    if batch.uniques is not None:
        ids, created = await insert_batch(store, batch.rows(trace), batch.uniques)
        return ids, sum(created)
    ids = await store.enqueue_payloads(
        options=batch.options,
        payloads=batch.payloads,
        trace=trace,
        keys=batch.keys if any(k is not None for k in batch.keys) else None,
        tags=batch.tags,
        meta=batch.meta,
    )
    return ids, len(ids)


async def insert_jobs(
    store: Store, rows: Sequence[JobRow], uniques: Sequence[UniqueKey | None]
) -> tuple[list[int], Sequence[JobRow]]:
    """``enqueue_jobs``'s jobs: one statement for all, or, where some have unique keys,
    as ``insert_batch`` stores them. Their ids, and the rows stored (not those whose
    unique key was taken)."""
    if not any(uniques):
        return [job.id for job in await store.enqueue_rows(rows=rows)], rows
    ids, created = await insert_batch(store, rows, uniques)
    return ids, [row for row, new in zip(rows, created, strict=True) if new]


async def insert_batch(
    store: Store, rows: Sequence[JobRow], uniques: Sequence[UniqueKey | None]
) -> tuple[list[int], list[bool]]:
    """A batch of which some jobs have unique keys, all or none, in one transaction:
    the others in one statement, each keyed one as ``insert`` stores it (the holder's
    id where its key is taken, as it is or changed by its ``on_conflict``); the ids in
    the batch's order, and whether each job was stored (False: its key's holder
    answered for it). Two jobs of the batch with one key meet as two enqueues would,
    the later one seeing the earlier."""
    ids = [0] * len(rows)
    created = [True] * len(rows)
    async with store.atomic() as tx:
        plain = [i for i, u in enumerate(uniques) if u is None]
        if plain:
            for i, job in zip(plain, await tx.enqueue_rows(rows=[rows[i] for i in plain]),
                              strict=True):  # fmt: skip
                ids[i] = job.id
        for i, unique in enumerate(uniques):
            if unique is not None:
                job, created[i] = await insert(tx, rows[i], unique)
                ids[i] = job.id
    return ids, created


async def insert_unique(
    store: Store, row: JobRow, key: str, hold: float | None
) -> tuple[Job, bool]:
    """The job, stored if no other job holds ``key`` (True); else the holder (False)."""
    # A holder can finish (or be deleted) between our attempt and our look at it:
    # then the key is free, and the next attempt takes it.
    for _ in range(UNIQUE_ATTEMPTS):
        job = await store.enqueue_unique(row=row, unique_key=key, hold_seconds=hold)
        if job is not None:
            return job, True
        holder = await store.unique_holder(unique_key=key)
        if holder is not None:
            return holder, False
    raise RuntimeError(f"unique key {key!r} kept changing hands; try again")


class Enqueuer:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._kept = KeptConnection(store.pool)
        self._pending: list[Pending] = []
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def insert(self, row: JobRow) -> Job:
        """Store one job's row and return the job."""
        if self._in_flight == 0:
            # Nothing to share with: insert at once, without a task or a future.
            self._in_flight += 1
            try:
                return (await self._write([row]))[0]
            finally:
                self._in_flight -= 1
                self._start_drain()
        future: asyncio.Future[Job] = asyncio.get_running_loop().create_future()
        self._pending.append((row, future))
        self._start_drain()
        return await future

    def _start_drain(self) -> None:
        if self._pending and self._in_flight < MAX_IN_FLIGHT:
            self._in_flight += 1
            task = asyncio.create_task(self._drain(), name="jobqueue-enqueue")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _drain(self) -> None:
        batch: list[Pending] = []
        try:
            while self._pending:
                batch = [p for p in self._pending[:MAX_BATCH] if not p[1].cancelled()]
                del self._pending[:MAX_BATCH]
                if batch:
                    await self._flush(batch)
        except BaseException as exc:  # cancelled with the loop: no caller waits for ever
            for _, future in batch:
                _settle(future, exception=exc)
            raise
        finally:
            self._in_flight -= 1

    async def _flush(self, batch: list[Pending]) -> None:
        try:
            records = await self._write([row for row, _ in batch])
        except Exception as exc:
            # An outage is every row's (and resending one of unknown fate could store
            # it twice); any other error is one row's.
            if len(batch) == 1 or isinstance(exc, EnqueueError):
                for _, future in batch:
                    _settle(future, exception=exc)
                return
            for row, future in batch:  # find whose row it was
                try:
                    _settle(future, (await self._write([row]))[0])
                except Exception as one:
                    _settle(future, exception=one)
            return
        for (_, future), record in zip(batch, records, strict=True):
            _settle(future, record)

    async def _write(self, rows: list[JobRow]) -> list[Job]:
        return await on_pool(self._store, lambda store: _insert_rows(store, rows), self._kept)

    async def close(self) -> None:
        """Give back the connection kept for the next enqueue (before the pool closes)."""
        await self._kept.close()


async def _insert_rows(store: Store, rows: list[JobRow]) -> list[Job]:
    if len(rows) == 1:
        return [await store.enqueue(row=rows[0])]
    return await store.enqueue_rows(rows=rows)


def _settle(
    future: asyncio.Future[Job],
    result: Job | None = None,
    *,
    exception: BaseException | None = None,
) -> None:
    if future.done():  # the caller was cancelled meanwhile; its row may be stored
        return
    if exception is not None:
        future.set_exception(exception)
    else:
        future.set_result(result)  # type: ignore[arg-type]  # set with every success
