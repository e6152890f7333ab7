"""JobQueue: the Python API. Register tasks, enqueue jobs, read them back.

jq = JobQueue()                         # DATABASE_URL, or the embedded default

@jq.task("send_email", max_attempts=5, queue="mail")
async def send_email(payload: dict) -> None: ...

job = await jq.enqueue("send_email", {"to": "a@b.c"})
job = jq.enqueue_sync("send_email", {"to": "a@b.c"})   # from sync code
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import json
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, Union

import asyncpg

from jobqueue import config, fields
from jobqueue.config import Settings
from jobqueue.cron import Schedule
from jobqueue.db.embedded import EmbeddedPostgres
from jobqueue.db.migrate import migrate
from jobqueue.db.pool import connect, create_pool, resolve_dsn
from jobqueue.db.sql import Queries, for_psycopg, queries
from jobqueue.enqueuer import Enqueuer
from jobqueue.job import (
    FINAL_STATES,
    RETRYABLE_STATES,
    Attempt,
    Job,
    JobNotFound,
    JobStateError,
    JobStatus,
    QueueInfo,
    WorkerInfo,
)
from jobqueue.retry import RetryPolicy
from jobqueue.task import Task, TaskDecorator

if TYPE_CHECKING:
    import psycopg
    from sqlalchemy.ext.asyncio import AsyncSession

    from jobqueue.new_job import NewJob
    from jobqueue.waiter import Waiter

# A connection of the application's, inside its transaction, for enqueue(conn=...).
AppConnection = Union[asyncpg.Connection, "psycopg.AsyncConnection[Any]", "AsyncSession"]

# Connections per process. Handlers never use them: a worker needs four at once
# (producer, completer, heartbeat, maintenance), whatever its WORKER_COUNT, and the
# rest serve concurrent HTTP requests; more would mostly queue inside PostgreSQL.
POOL_SIZE = 16
# Jobs per statement of a bulk retry: each batch locks this many rows, briefly.
RETRY_BATCH = 1000
RETRYABLE = sorted(RETRYABLE_STATES)
# Rounds of "take the key, else read its holder" before giving up (see _insert_unique).
UNIQUE_ATTEMPTS = 5
T = TypeVar("T")


class JobQueue:
    """Tasks plus a connection to the queue's database.

    ``dsn`` and ``schema`` override ``DATABASE_URL`` and ``JOBQUEUE_SCHEMA``; with
    neither a DSN nor ``DATABASE_URL`` the embedded PostgreSQL in
    ``JOBQUEUE_DATA_DIR`` is used (started, or joined if another process runs it).
    The connection opens on first use; ``close()`` (or ``async with``) ends it.
    """

    def __init__(
        self, dsn: str | None = None, *, schema: str | None = None, settings: Settings | None = None
    ) -> None:
        settings = settings or config.load()
        if dsn is not None:
            settings = dataclasses.replace(settings, database_url=dsn)
        if schema is not None:
            settings = dataclasses.replace(settings, schema=config.schema_name("schema", schema))
        self.settings = settings
        self.tasks: dict[str, Task[Any, Any]] = {}
        self._dsn: str | None = None
        self._embedded: EmbeddedPostgres | None = None
        self._pools: dict[asyncio.AbstractEventLoop, asyncpg.Pool] = {}
        self._enqueuers: dict[asyncio.AbstractEventLoop, Enqueuer] = {}
        self._waiters: dict[asyncio.AbstractEventLoop, Waiter] = {}
        self._sync_loop: asyncio.AbstractEventLoop | None = None
        self._sync_thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # Set by jobqueue.testing.inline: runs the due jobs right after an enqueue.
        self.after_enqueue: Callable[[], Awaitable[None]] | None = None

    @property
    def queries(self) -> Queries:
        return queries(self.settings.schema)

    # -- tasks ---------------------------------------------------------------

    def task(
        self,
        type: str,
        *,
        queue: str | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        timeout: float | None = None,
        isolated: bool = False,
        retry: RetryPolicy | None = None,
        cron: str | None = None,
        cron_timezone: str = "UTC",
    ) -> TaskDecorator:
        """Register the decorated function (sync or async) as the handler of ``type``,
        and return it as a Task (see jobqueue.task: typed payloads, ``.enqueue()``).

        ``timeout``: seconds an attempt may run (default JOBQUEUE_JOB_TIMEOUT, else none).
        ``isolated``: run each attempt of this sync handler in a child process, so that a
        timeout or shutdown can kill it (see jobqueue.worker.isolation for the cost).
        ``retry``: ``(attempt) -> seconds`` before the next attempt (see jobqueue.retry);
        default: exponential backoff from RETRY_DELAY_SECONDS.
        ``cron``: also enqueue a job of this type at every tick of this cron expression,
        read in ``cron_timezone`` (see jobqueue.maintenance.scheduler).
        """
        type = fields.check_type(type)
        fields.check_options(queue=queue, max_attempts=max_attempts, priority=priority)
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if retry is not None and not callable(retry):
            raise ValueError(f"retry must be a callable (attempt) -> seconds, got {retry!r}")
        schedule = None if cron is None else Schedule(type, cron, cron_timezone)

        def register(fn: Callable[..., Any]) -> Task[Any, Any]:
            if type in self.tasks:
                raise ValueError(f"a handler for job type {type!r} is already registered")
            task: Task[Any, Any] = Task(
                type, fn, self, queue, max_attempts, priority, timeout, isolated, retry, schedule
            )
            if isolated and task.is_async:
                raise ValueError("isolated=True is for sync handlers; async ones are cancelled")
            self.tasks[type] = task
            return task

        return register

    def queue_names(self) -> set[str]:
        return {t.queue for t in self.tasks.values() if t.queue}

    # -- connection ------------------------------------------------------------

    @property
    def dsn(self) -> str:
        """The database's DSN; resolving it may start the embedded server."""
        with self._lock:
            if self._dsn is None:
                self._dsn, self._embedded = resolve_dsn(self.settings)
            return self._dsn

    def use_dsn(self, dsn: str) -> None:
        """Use a DSN resolved elsewhere (the server process resolves it once)."""
        self._dsn = dsn

    async def pool(self) -> asyncpg.Pool:
        """This event loop's pool, opened on first use."""
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            dsn = await self._resolved_dsn()
            pool = await create_pool(
                dsn, max_size=POOL_SIZE, statement_timeout=self.settings.statement_timeout
            )
            self._pools[loop] = pool
            self._enqueuers[loop] = Enqueuer(pool, self.queries)
        return pool

    async def _resolved_dsn(self) -> str:
        # Starting the embedded server blocks for up to a second: not on the event loop.
        return self._dsn if self._dsn is not None else await asyncio.to_thread(lambda: self.dsn)

    async def migrate(self) -> list[int]:
        """Apply the schema; returns the migration versions applied now."""
        # A connection of its own: a migration may outlast the pool's statement timeout.
        conn = await connect(await self._resolved_dsn())
        try:
            return await migrate(conn, self.settings.schema)
        finally:
            await conn.close()

    async def close_pool(self, *, terminate: bool = False) -> None:
        """Close this event loop's pool; the next use opens a new one. ``terminate``
        drops the connections at once (the database is gone: nothing to say goodbye to).
        """
        loop = asyncio.get_running_loop()
        self._enqueuers.pop(loop, None)
        waiter = self._waiters.pop(loop, None)
        if waiter is not None:
            await waiter.close()
        pool = self._pools.pop(loop, None)
        if pool is not None and terminate:
            pool.terminate()
        elif pool is not None:
            await pool.close()

    async def close(self) -> None:
        """Close this loop's pool (and the sync API's), and stop an embedded server we own."""
        await self.close_pool()
        self._close_sync_loop()
        if not self._pools and self._embedded is not None:
            await asyncio.to_thread(self._stop_embedded)

    async def __aenter__(self) -> JobQueue:
        await self.pool()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- jobs ----------------------------------------------------------------

    async def enqueue(
        self,
        type: str,
        payload: Any = None,
        *,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        run_at: datetime | None = None,
        delay_seconds: float | None = None,
        unique_key: str | None = None,
        unique_for: float | None = None,
        conn: AppConnection | None = None,
    ) -> Job:
        """Store a new job and return it.

        With ``conn`` (an asyncpg connection, a psycopg 3 AsyncConnection or a SQLAlchemy
        AsyncSession, inside the application's transaction)
        the job exists exactly when that transaction commits, and workers are
        woken at commit. A value that breaks a rule raises ValueError naming the field.

        With ``unique_key``, while another job with that key is pending or running (or
        completed less than ``unique_for`` seconds ago), nothing is stored and that job
        is returned instead.

        ``payload``: a mapping, or for a typed task (see jobqueue.task) an instance of its
        payload type; it is checked against that type (PayloadError, a ValueError).
        """
        fields.check_options(unique_key=unique_key, unique_for=unique_for)
        row = self._row(
            type,
            payload,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            run_at=run_at,
            delay_seconds=delay_seconds,
        )
        job, _ = await self._insert(row, unique_key, unique_for, conn)
        if self.after_enqueue is not None and conn is None:
            await self.after_enqueue()
            return await self.get(job.id) or job
        return job

    async def enqueue_job(
        self, spec: NewJob, *, conn: asyncpg.Connection | None = None
    ) -> tuple[Job, bool]:
        """Store a job described by a validated NewJob (what POST /jobs receives); return
        it and whether it is new (False: the holder of its unique key)."""
        row = self._row_of(spec)
        return await self._insert(row, spec.unique_key, spec.unique_for, conn)

    async def _insert(
        self,
        row: tuple[Any, ...],
        unique_key: str | None,
        unique_for: float | None,
        conn: asyncpg.Connection | None,
    ) -> tuple[Job, bool]:
        if unique_key is not None:
            return await self._insert_unique(row, unique_key, unique_for, conn)
        if conn is not None:  # the caller's transaction: never shared with other calls
            return Job.from_record(await _fetchrow(conn, self.queries.enqueue, *row)), True
        await self.pool()
        enqueuer = self._enqueuers[asyncio.get_running_loop()]
        return Job.from_record(await enqueuer.insert(row)), True

    async def _insert_unique(
        self,
        row: tuple[Any, ...],
        key: str,
        hold: float | None,
        conn: asyncpg.Connection | None,
    ) -> tuple[Job, bool]:
        db = conn if conn is not None else await self.pool()
        # A holder can finish (or be deleted) between our attempt and our look at it:
        # then the key is free, and the next attempt takes it.
        for _ in range(UNIQUE_ATTEMPTS):
            record = await _fetchrow(db, self.queries.enqueue_unique, *row, key, hold)
            if record is not None:
                return Job.from_record(record), True
            holder = await _fetchrow(db, self.queries.unique_holder, key)
            if holder is not None:
                return Job.from_record(holder), False
        raise RuntimeError(f"unique key {key!r} kept changing hands; try again")

    async def enqueue_many(
        self,
        type: str,
        payloads: Iterable[Any],
        *,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        run_at: datetime | None = None,
        delay_seconds: float | None = None,
        conn: asyncpg.Connection | None = None,
    ) -> list[int]:
        """Store one job of ``type`` per payload, all or none, in one statement; return
        their ids in order. Workers are woken once per batch, not once per job."""
        type_, queue_, *rest = self._options(
            type,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            run_at=run_at,
            delay_seconds=delay_seconds,
        )
        encoded = []
        for i, payload in enumerate(payloads):
            try:
                encoded.append(_encode_payload(self._payload(type_, payload)))
            except ValueError as exc:
                raise ValueError(f"payloads[{i}]: {exc}") from exc
        if not encoded:
            return []
        db = conn if conn is not None else await self.pool()
        records = await db.fetch(self.queries.enqueue_payloads, type_, queue_, encoded, *rest)
        if self.after_enqueue is not None and conn is None:
            await self.after_enqueue()
        return [r[0] for r in records]

    async def enqueue_jobs(
        self, specs: Sequence[NewJob], *, conn: asyncpg.Connection | None = None
    ) -> list[int]:
        """Store jobs of any types and options, all or none, in one statement. Unique
        keys are for ``enqueue`` (POST /jobs): a batch cannot say which of its jobs a
        taken key should drop."""
        for i, spec in enumerate(specs):
            if spec.unique_key is not None:
                raise ValueError(f"jobs[{i}].unique_key: not supported in a batch")
        rows = [self._row_of(spec) for spec in specs]
        columns = tuple(list(column) for column in zip(*rows, strict=True)) if rows else ()
        return await self._insert_many(columns or ([],) * 7, conn)

    async def _insert_many(
        self, columns: tuple[list[Any], ...], conn: asyncpg.Connection | None
    ) -> list[int]:
        if not columns[0]:
            return []
        db = conn if conn is not None else await self.pool()
        return [r["id"] for r in await db.fetch(self.queries.enqueue_rows, *columns)]

    def _row_of(self, spec: NewJob) -> tuple[Any, ...]:
        return self._row(
            spec.type,
            spec.payload,
            queue=spec.queue,
            priority=spec.priority,
            max_attempts=spec.max_attempts,
            run_at=spec.run_at,
            delay_seconds=spec.delay_seconds,
        )

    def _row(
        self,
        type: str,
        payload: Any,
        *,
        queue: str | None,
        priority: int | None,
        max_attempts: int | None,
        run_at: datetime | None,
        delay_seconds: float | None,
    ) -> tuple[Any, ...]:
        """The values of one job's row, checked, with the task's defaults filled in."""
        type, queue_, *rest = self._options(
            type,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            run_at=run_at,
            delay_seconds=delay_seconds,
        )
        return (type, queue_, _encode_payload(self._payload(type, payload)), *rest)

    def _options(
        self,
        type: str,
        *,
        queue: str | None,
        priority: int | None,
        max_attempts: int | None,
        run_at: datetime | None,
        delay_seconds: float | None,
    ) -> tuple[Any, ...]:
        """A row's values but the payload: type, queue, priority, max_attempts, run_at,
        delay_seconds."""
        type = fields.check_type(type)
        fields.check_options(
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            run_at=run_at,
            delay_seconds=delay_seconds,
        )
        queue, priority, max_attempts = job_options(
            self.tasks.get(type), self.settings, queue, priority, max_attempts
        )
        return (type, queue, priority, max_attempts, run_at, delay_seconds)

    def _payload(self, type: str, payload: Any) -> Mapping[str, Any]:
        """The payload to store: checked against the task's payload type, if it has one."""
        task = self.tasks.get(type)
        if task is not None and task.payload_type is not None:
            return task.dump({} if payload is None else payload)
        if payload is None:
            return {}
        fields.check_options(payload=payload)
        return payload  # type: ignore[no-any-return]  # a Mapping: checked just above

    async def get(self, job_id: int) -> Job | None:
        record = await (await self.pool()).fetchrow(self.queries.get_job, job_id)
        return None if record is None else Job.from_record(record)

    async def wait(self, job_id: int, timeout: float | None = None) -> Job:
        """The job once it is completed, failed or cancelled (at once if it already is).

        Woken by the database's announcement of the job's end (LISTEN), with a slow
        fallback read (see jobqueue.waiter); no polling loop. Raises JobNotFound, or
        TimeoutError if the job is still pending or running after ``timeout`` seconds
        (None: wait as long as it takes). A failed job is returned, not raised: its
        ``last_error`` says why.
        """
        return await (await self.waiter()).wait(job_id, timeout)

    async def waiter(self) -> Waiter:
        """This event loop's Waiter (see jobqueue.waiter), made on first use."""
        from jobqueue.waiter import Waiter  # it imports jobqueue.worker, which imports us

        loop = asyncio.get_running_loop()
        waiter = self._waiters.get(loop)
        if waiter is None:
            waiter = self._waiters[loop] = Waiter(self, await self._resolved_dsn())
        return waiter

    def wait_sync(self, job_id: int, timeout: float | None = None) -> Job:
        """``wait`` for code without an event loop."""
        return self._run_sync(self.wait(job_id, timeout))

    async def list(
        self,
        *,
        status: JobStatus | str | None = None,
        type: str | None = None,
        queue: str | None = None,
        after: int | None = None,
        limit: int = 50,
    ) -> list[Job]:
        """Jobs newest first; pass the last id of a page as ``after`` for the next page."""
        status = JobStatus(status) if status is not None else None
        records = await (await self.pool()).fetch(
            self.queries.list_jobs, status, type, queue, after, limit
        )
        return [Job.from_record(r) for r in records]

    async def retry(self, job_id: int) -> Job:
        """Make a failed or cancelled job pending again, with fresh attempts, to run now.

        Raises JobNotFound, or JobStateError for a job in any other state (a pending or
        running job will run anyway; a completed one must not run twice by accident).
        """
        async with (await self.pool()).acquire() as conn, conn.transaction():
            retried = await conn.fetch(
                self.queries.retry_jobs, job_id, None, None, None, None, RETRYABLE, 1
            )
            # In the same transaction: the row as retried, before a worker can claim it.
            record = await conn.fetchrow(self.queries.get_job, job_id)
        if record is None:
            raise JobNotFound(job_id)
        job = Job.from_record(record)
        if not retried:
            raise JobStateError(job, "retry", "failed or cancelled")
        return job

    async def retry_many(
        self,
        *,
        type: str | None = None,
        queue: str | None = None,
        finished_after: datetime | None = None,
        finished_before: datetime | None = None,
        statuses: Iterable[JobStatus | str] = RETRYABLE_STATES,
    ) -> int:
        """Retry every failed (and cancelled) job matching all the filters given; return
        how many. Runs in batches of RETRY_BATCH, so that no statement locks them all."""
        wanted = sorted({JobStatus(s) for s in statuses})
        if not wanted or not set(wanted) <= RETRYABLE_STATES:
            raise ValueError("statuses: only failed and cancelled jobs can be retried")
        pool, total = await self.pool(), 0
        while True:
            retried = await pool.fetch(
                self.queries.retry_jobs,
                None, type, queue, finished_after, finished_before, wanted, RETRY_BATCH,
            )  # fmt: skip
            n = len(retried)
            total += n
            if n < RETRY_BATCH:
                return total

    async def cancel(self, job_id: int) -> Job:
        """Cancel a job: a pending one is ``cancelled`` at once; a running one is asked to
        stop (``cancel_requested_at`` is set) and its worker ends it ``cancelled`` within
        moments, never to be retried. Raises JobNotFound, or JobStateError for a job
        that already ended."""
        async with (await self.pool()).acquire() as conn, conn.transaction():
            await conn.fetch(self.queries.cancel_jobs, job_id, None, None, 1)
            record = await conn.fetchrow(self.queries.get_job, job_id)
        if record is None:
            raise JobNotFound(job_id)
        job = Job.from_record(record)
        if job.status in FINAL_STATES and not (
            job.status == JobStatus.CANCELLED and job.cancel_requested_at is not None
        ):
            raise JobStateError(job, "cancel", "pending or running")
        return job

    async def cancel_many(
        self, *, type: str | None = None, queue: str | None = None
    ) -> dict[str, int]:
        """Cancel every pending and running job matching all the filters given, in batches;
        return how many were cancelled at once (pending) and how many asked to stop."""
        pool = await self.pool()
        counts = {"cancelled": 0, "requested": 0}
        while True:
            rows = await pool.fetch(self.queries.cancel_jobs, None, type, queue, RETRY_BATCH)
            for row in rows:
                counts["cancelled" if row["status"] == "cancelled" else "requested"] += 1
            if len(rows) < RETRY_BATCH:
                return counts

    async def attempts(self, job_id: int) -> builtins.list[Attempt]:
        """The job's failed attempts, oldest first: error, traceback, worker, timing."""
        records = await (await self.pool()).fetch(self.queries.job_attempts, job_id)
        return [Attempt(**dict(r.items())) for r in records]

    async def queues(self) -> builtins.list[QueueInfo]:
        """Every queue with jobs or controls, by name."""
        records = await (await self.pool()).fetch(self.queries.queues_overview, None)
        return [QueueInfo(**dict(r.items())) for r in records]

    async def queue(self, name: str) -> QueueInfo:
        """One queue; a queue with no job and no control shows zeros."""
        fields.check_options(queue=name)
        records = await (await self.pool()).fetch(self.queries.queues_overview, name)
        if records:
            return QueueInfo(**dict(records[0].items()))
        return QueueInfo(name, 0, 0, 0, 0, 0, False, None, None)

    async def pause(self, name: str) -> QueueInfo:
        """Stop every worker from starting jobs of this queue (running ones finish);
        the queue keeps accepting jobs."""
        fields.check_options(queue=name)
        await (await self.pool()).execute(self.queries.queue_pause, name)
        return await self.queue(name)

    async def resume(self, name: str) -> QueueInfo:
        """Let workers start this queue's jobs again, at once."""
        fields.check_options(queue=name)
        await (await self.pool()).execute(self.queries.queue_resume, name)
        return await self.queue(name)

    async def workers(self) -> builtins.list[WorkerInfo]:
        """Worker processes that have announced themselves, oldest first."""
        records = await (await self.pool()).fetch(self.queries.workers_list)
        return [WorkerInfo(**dict(r.items())) for r in records]

    # -- the sync API ------------------------------------------------------------

    def enqueue_sync(
        self,
        type: str,
        payload: Any = None,
        *,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        run_at: datetime | None = None,
        delay_seconds: float | None = None,
        unique_key: str | None = None,
        unique_for: float | None = None,
        conn: Any = None,
    ) -> Job:
        """``enqueue`` for code without an event loop (scripts, WSGI apps, threads).

        ``conn``: a psycopg 3 connection, a SQLAlchemy Session over one, or Django's
        ``django.db.connection`` (psycopg 3 backend), inside the application's
        transaction; the job exists exactly when that transaction commits (run in the
        caller's thread, on the caller's connection).
        """
        options: dict[str, Any] = dict(
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            run_at=run_at,
            delay_seconds=delay_seconds,
        )
        if conn is None:
            return self._run_sync(
                self.enqueue(type, payload, unique_key=unique_key, unique_for=unique_for, **options)
            )
        fields.check_options(unique_key=unique_key, unique_for=unique_for)
        row = self._row(type, payload, **options)
        if unique_key is None:
            return Job.from_record(_fetchrow_sync(conn, self.queries.enqueue, *row))
        for _ in range(UNIQUE_ATTEMPTS):  # as in _insert_unique
            record = _fetchrow_sync(conn, self.queries.enqueue_unique, *row, unique_key, unique_for)
            if record is not None:
                return Job.from_record(record)
            holder = _fetchrow_sync(conn, self.queries.unique_holder, unique_key)
            if holder is not None:
                return Job.from_record(holder)
        raise RuntimeError(f"unique key {unique_key!r} kept changing hands; try again")

    def get_sync(self, job_id: int) -> Job | None:
        return self._run_sync(self.get(job_id))

    def close_sync(self) -> None:
        self._close_sync_loop()
        if self._embedded is not None:
            self._stop_embedded()

    def _stop_embedded(self) -> None:
        # Forget its address too: a later use starts (or joins) a server again.
        with self._lock:
            embedded, self._embedded, self._dsn = self._embedded, None, None
        if embedded is not None:
            embedded.stop()

    def _run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        # One private loop in a daemon thread serves every sync call, so a
        # script pays for the connection once, not once per call.
        with self._lock:
            if self._sync_loop is None:
                loop = asyncio.new_event_loop()
                self._sync_thread = threading.Thread(
                    target=loop.run_forever, name="jobqueue-sync-api", daemon=True
                )
                self._sync_thread.start()
                self._sync_loop = loop
            loop = self._sync_loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def _close_sync_loop(self) -> None:
        loop, self._sync_loop = self._sync_loop, None
        if loop is None:
            return
        asyncio.run_coroutine_threadsafe(self.close_pool(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        if self._sync_thread is not None:
            self._sync_thread.join()
        loop.close()


def job_options(
    task: Task[Any, Any] | None,
    settings: Settings,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
) -> tuple[str, int, int]:
    """A job's queue, priority and max_attempts: its own, else its task's, else the defaults."""
    return (
        queue or (task and task.queue) or "default",
        _first(priority, task and task.priority, 0),
        _first(max_attempts, task and task.max_attempts, settings.max_attempts),
    )


def _is_psycopg(conn: Any) -> bool:
    # By module, so that psycopg is imported only by applications that use it.
    return type(conn).__module__.startswith("psycopg")


def _is_sqlalchemy(conn: Any) -> bool:
    return type(conn).__module__.startswith("sqlalchemy")


async def _fetchrow(conn: Any, sql: str, *args: Any) -> Any:
    """One row of one of our queries, on an asyncpg connection (or pool), a psycopg 3
    AsyncConnection, or a SQLAlchemy AsyncSession over either: the application's own,
    inside its transaction."""
    if _is_sqlalchemy(conn):  # the session's connection, inside its transaction
        session_conn = await conn.connection()
        # SQLAlchemy's asyncpg adapter sends BEGIN with its first statement, not before:
        # without one of its own, our INSERT would run (and commit) outside it.
        await session_conn.exec_driver_sql("SELECT 1")
        conn = (await session_conn.get_raw_connection()).driver_connection
    if not _is_psycopg(conn):
        return await conn.fetchrow(sql, *args)
    from psycopg.rows import dict_row

    text, order = for_psycopg(sql)
    async with conn.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(text, [args[i] for i in order])
        return await cursor.fetchone()


def _fetchrow_sync(conn: Any, sql: str, *args: Any) -> Any:
    """_fetchrow for a sync psycopg 3 Connection, or a SQLAlchemy Session over one."""
    if _is_sqlalchemy(conn):
        conn = conn.connection().connection.driver_connection
    elif type(conn).__module__.startswith("django"):  # django.db.connection, on psycopg 3
        conn.ensure_connection()
        conn = conn.connection
    if not _is_psycopg(conn):
        raise TypeError(
            f"enqueue_sync(conn=...) takes a psycopg 3 connection, a SQLAlchemy Session "
            f"over one or django.db.connection, got {conn!r}"
        )
    from psycopg.rows import dict_row

    text, order = for_psycopg(sql)
    with conn.cursor(row_factory=dict_row) as cursor:
        cursor.execute(text, [args[i] for i in order])
        return cursor.fetchone()


# One encoder for every call: json.dumps with options builds a new one each time.
_JSON = json.JSONEncoder(separators=(",", ":"))


def _encode_payload(payload: Mapping[str, Any]) -> str:
    # JSON text, not a dict: an application's own connection has no jsonb codec.
    return _JSON.encode(payload)


def _first(*values: Any) -> Any:
    return next(v for v in values if v is not None)
