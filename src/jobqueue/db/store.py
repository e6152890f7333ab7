"""The store: every query of jobqueue as one typed method with keyword arguments.

Nothing else runs a query. Each method binds its arguments to its .sql file's
``$n`` placeholders in one place, so a caller never counts positions, and returns
typed records (jobqueue.model.job, jobqueue.db.records), never a driver's row. The queries
of the jobs' path are here; those of one concern each are in the parts the Store
inherits (process_queries.py, workflow_queries.py, queue_queries.py, step_queries.py,
admin_queries.py, on query_base.py). A test checks that every .sql file has exactly one
method among them, and that nothing outside them runs SQL of its own.

A store runs on an Executor: an asyncpg pool or connection, or one of the
application's connections adapted by jobqueue.db.connections. ``store.on(conn)``
gives the same store on another connection; ``store.transaction()`` one on a pooled
connection inside a transaction.

Time: every query that reads the clock takes ``now`` from the store's Clock, as
River's queries take ``sqlc.narg('now')``. Unset, which is what production wants,
the query uses the database's ``now()``, one clock that every process agrees on. A
test sets the clock to make a lease expire or a retention period pass without
sleeping. Triggers and column defaults keep the database's time.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from datetime import datetime

import asyncpg
from asyncpg.transaction import Transaction

from jobqueue.db.admin_queries import AdminQueries
from jobqueue.db.process_queries import ProcessQueries
from jobqueue.db.query_base import (
    Clock,
    Executor,
    QueryBase,
    _columns,
    _fenced_out,
    _held,
    _list,
    _tags_and_meta,
    _values,
)
from jobqueue.db.queue_queries import QueueQueries
from jobqueue.db.records import (
    Cancelled,
    ClaimedJob,
    ClaimKey,
    Failure,
    JobOptions,
    JobRow,
    LogChunk,
    ProgressReport,
    RememberedKey,
    Renewal,
    Snoozed,
)
from jobqueue.db.schedule_queries import ScheduleQueries
from jobqueue.db.search_queries import SearchQueries
from jobqueue.db.sql import Queries, queries
from jobqueue.db.step_queries import StepQueries
from jobqueue.db.wait_queries import WaitQueries
from jobqueue.db.workflow_queries import WorkflowQueries
from jobqueue.model.job import Attempt, Job, JobStatus


class Store(
    ProcessQueries,
    WorkflowQueries,
    QueueQueries,
    ScheduleQueries,
    SearchQueries,
    StepQueries,
    WaitQueries,
    AdminQueries,
    QueryBase,
):
    def __init__(self, db: Executor, schema: str, clock: Clock | None = None) -> None:
        self.db = db
        self.schema = schema
        self.clock = clock or Clock()
        self._q: Queries = queries(schema)

    def on(self, db: Executor) -> Store:
        """This store (schema and clock) on another connection."""
        return Store(db, self.schema, self.clock)

    def connection(self) -> OnConnection:
        """This store on one connection of its pool, for several queries in a row."""
        return OnConnection(self)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Store]:
        """This store on one pooled connection, inside a transaction."""
        async with self.pool.acquire() as conn, conn.transaction():
            yield self.on(conn)

    def begin(self) -> Transaction:
        """A transaction on this store's one connection, to start and end by hand (a
        savepoint within one): for a caller that must tell a failed COMMIT apart."""
        if isinstance(self.db, asyncpg.Pool) or not hasattr(self.db, "transaction"):
            raise TypeError("a transaction needs one connection, not a pool")
        transaction: Transaction = self.db.transaction()
        return transaction

    @contextlib.asynccontextmanager
    async def atomic(self) -> AsyncIterator[Store]:
        """This store inside a transaction of its own on its one connection (a savepoint
        within the caller's); on an application's connection of another driver, the
        transaction that connection is in."""
        try:
            transaction = self.begin()
        except TypeError:
            yield self
            return
        async with transaction:
            yield self

    @property
    def pool(self) -> asyncpg.Pool:
        """The pool this store runs on (TypeError if it runs on one connection)."""
        if not isinstance(self.db, asyncpg.Pool):
            raise TypeError("this store runs on one connection, not on a pool")
        return self.db

    @property
    def channel(self) -> str:
        """The NOTIFY channel of new jobs; its payload names their queue."""
        return self._q.channel

    @property
    def cancel_channel(self) -> str:
        """The NOTIFY channel of running jobs asked to stop; its payload is the id."""
        return self._q.cancel_channel

    @property
    def done_channel(self) -> str:
        """The NOTIFY channel of jobs that ended; its payload is their ids."""
        return self._q.done_channel

    # -- enqueueing --------------------------------------------------------------

    async def enqueue(self, *, row: JobRow) -> Job:
        record = await self.db.fetchrow(
            self._q.enqueue, *_values(row), self.clock.now(), row.trace, row.concurrency_key,
            row.tags, row.meta,
        )  # fmt: skip
        return row.stored(record)

    async def enqueue_rows(self, *, rows: Sequence[JobRow]) -> list[Job]:
        """Many rows in one statement, in order."""
        now = self.clock.now()
        columns = _columns(rows)
        traces = [r.trace for r in rows]
        keys = [r.concurrency_key for r in rows]
        records = await self.db.fetch(
            self._q.enqueue_rows, *columns, now, traces, keys, *_tags_and_meta(rows)
        )
        return [row.stored(record) for row, record in zip(rows, records, strict=True)]

    async def enqueue_payloads(
        self,
        *,
        options: JobOptions,
        payloads: Sequence[str],
        trace: str | None = None,
        keys: Sequence[str | None] | None = None,
        tags: list[str] | None = None,
        meta: str | None = None,
    ) -> list[int]:
        """One job per payload (JSON text), all with the same options, trace context
        (JSON text, or None), tags and metadata (JSON text); their ids in order.
        ``keys``: each one's concurrency key."""
        o = options
        records = await self.db.fetch(
            self._q.enqueue_payloads,
            o.type, o.queue, list(payloads), o.priority, o.max_attempts, o.run_at,
            o.delay_seconds, self.clock.now(), trace, None if keys is None else list(keys),
            tags, meta,
        )  # fmt: skip
        return [r[0] for r in records]

    async def enqueue_unique(
        self, *, row: JobRow, unique_key: str, hold_seconds: float | None
    ) -> Job | None:
        """The job, stored if ``unique_key`` is free (None: it is held)."""
        record = await self.db.fetchrow(
            self._q.enqueue_unique, *_values(row), unique_key, hold_seconds, self.clock.now(),
            row.trace, row.concurrency_key, row.tags, row.meta,
        )  # fmt: skip
        return None if record is None else Job.from_record(record)

    async def enqueue_unique_replacing(
        self, *, row: JobRow, unique_key: str, hold_seconds: float | None, debounce: bool
    ) -> tuple[Job, bool]:
        """The job stored under ``unique_key``, or its pending holder changed to this
        job (replaced, or debounced); and whether it is new."""
        record = await self.db.fetchrow(
            self._q.enqueue_unique_replacing, *_values(row), unique_key, hold_seconds,
            self.clock.now(), row.trace, row.concurrency_key, debounce, row.tags, row.meta,
        )  # fmt: skip
        return Job.from_record(record), bool(record["created"])

    async def unique_holder(self, *, unique_key: str) -> Job | None:
        record = await self.db.fetchrow(self._q.unique_holder, unique_key)
        return None if record is None else Job.from_record(record)

    async def idempotency_take(
        self, *, principal: str | None, key: str, request_hash: bytes, ttl_seconds: float
    ) -> bool:
        """Whether the key was free (or expired) and is now this request's."""
        taken = await self.db.fetchval(
            self._q.idempotency_take, principal, key, request_hash, ttl_seconds, self.clock.now()
        )
        return bool(taken)

    async def idempotency_bind(self, *, principal: str | None, key: str, job_id: int) -> None:
        await self.db.execute(self._q.idempotency_bind, principal, key, job_id)

    async def idempotency_lookup(self, *, principal: str | None, key: str) -> RememberedKey | None:
        """The unexpired key: its request's hash, its job's id and that job if it exists."""
        record = await self.db.fetchrow(
            self._q.idempotency_lookup, principal, key, self.clock.now()
        )
        if record is None:
            return None
        job = None if record["id"] is None else Job.from_record(record)
        return RememberedKey(record["request_hash"], record["key_job_id"], job)

    # -- a worker's claims and fenced writes ----------------------------------------

    async def claim(
        self,
        *,
        queue: str,
        limit: int,
        worker_id: str,
        lease_seconds: float,
        resume_at: ClaimKey | None = None,
        types: Sequence[str] | None = None,
    ) -> list[ClaimedJob]:
        """Claim up to ``limit`` due jobs of ``queue``, best first. ``resume_at``: where
        this worker's last claim of the queue ended, to scan from there (claim.sql).
        ``types``: only jobs of these types (None: of every type)."""
        at = resume_at or (None, None, None)
        rows = await self.db.fetch(
            self._q.claim, queue, limit, worker_id, lease_seconds, self.clock.now(), *at,
            _list(types),
        )  # fmt: skip
        return [ClaimedJob.from_record(row) for row in rows]

    async def limit_due(self, *, queue: str) -> bool:
        """Whether limited ``queue`` has a due job (asked before taking its lock)."""
        due: bool = await self.db.fetchval(self._q.limit_due, queue, self.clock.now())
        return due

    async def limit_lock(self, *, queue: str) -> None:
        """Wait for the claims of limited ``queue`` before this one (in a transaction)."""
        await self.db.execute(self._q.limit_lock, queue)

    async def claim_limited(
        self,
        *,
        queue: str,
        limit: int,
        worker_id: str,
        lease_seconds: float,
        types: Sequence[str] | None = None,
    ) -> list[ClaimedJob]:
        """Claim up to ``limit`` due jobs of ``queue`` within its limits; after
        ``limit_lock`` in the same transaction (jobqueue.worker.limited_claim). ``types``: only
        jobs of these types (None: of every type)."""
        rows = await self.db.fetch(
            self._q.claim_limited, queue, limit, worker_id, lease_seconds, self.clock.now(),
            _list(types),
        )  # fmt: skip
        return [ClaimedJob.from_record(row) for row in rows]

    async def complete(
        self,
        *,
        jobs: Sequence[ClaimedJob],
        worker_id: str,
        status: JobStatus,
        error: str | None = None,
        results: str | None = None,
    ) -> list[ClaimedJob]:
        """End ``jobs`` as ``status`` (completed, or cancelled while running), with
        ``results``: ``{"<id>": result, ...}`` as JSON text, or None. Returns the jobs
        the fence refused: no longer held by this attempt."""
        rows = await self.db.fetch(
            self._q.complete, [j.id for j in jobs], _held(jobs), worker_id, status, error,
            results, self.clock.now(),
        )  # fmt: skip
        return _fenced_out(jobs, rows)

    async def complete_handoff(
        self,
        *,
        jobs: Sequence[ClaimedJob],
        worker_id: str,
        results: str | None,
        queues: Sequence[str],
        limit: int,
        lease_seconds: float,
        types: Sequence[str] | None = None,
    ) -> tuple[list[ClaimedJob], list[ClaimedJob]]:
        """Complete ``jobs`` as ``complete`` does, and claim for ``worker_id`` up to
        ``limit`` of the children their completion releases, in ``queues``, of
        ``types`` (None: any; complete_handoff.sql says which). Returns the jobs the
        fence refused, and the children claimed."""
        rows = await self.db.fetch(
            self._q.complete_handoff, [j.id for j in jobs], _held(jobs), worker_id, results,
            self.clock.now(), list(queues), limit, lease_seconds, _list(types),
        )  # fmt: skip
        done = [row for row in rows if not row["handed"]]
        handed = [ClaimedJob.from_record(row) for row in rows if row["handed"]]
        return _fenced_out(jobs, done), handed

    async def fail(self, *, failures: Sequence[Failure], worker_id: str) -> list[ClaimedJob]:
        """Record failed attempts: retried after their delay, or failed for good.
        Returns the jobs the fence refused."""
        jobs = [f.job for f in failures]
        attempts = {
            str(f.job.id): {
                "claim": f.job.claim,
                "error": f.error,
                "traceback": f.traceback,
                "delay": f.delay,
            }
            for f in failures
        }
        rows = await self.db.fetch(
            self._q.fail, [j.id for j in jobs], json.dumps(attempts), worker_id, self.clock.now()
        )
        return _fenced_out(jobs, rows)

    async def snooze(
        self, *, snoozes: Sequence[Snoozed], worker_id: str, max_snoozes: int
    ) -> list[ClaimedJob]:
        """Record snoozed attempts: each job due again after its delay, the attempt
        uncounted; failed once snoozed ``max_snoozes`` times. Returns the jobs the fence
        refused."""
        jobs = [s.job for s in snoozes]
        held = {str(s.job.id): {"claim": s.job.claim, "delay": s.delay} for s in snoozes}
        rows = await self.db.fetch(
            self._q.snooze, [j.id for j in jobs], json.dumps(held), worker_id, self.clock.now(),
            max_snoozes,
        )  # fmt: skip
        return _fenced_out(jobs, rows)

    async def release(self, *, jobs: Sequence[ClaimedJob], worker_id: str) -> list[ClaimedJob]:
        """Hand ``jobs`` back to the queue, the attempt not counted (shutdown). Returns
        the jobs the fence refused."""
        rows = await self.db.fetch(
            self._q.release, [j.id for j in jobs], _held(jobs), worker_id, self.clock.now()
        )
        return _fenced_out(jobs, rows)

    async def heartbeat(
        self, *, jobs: Sequence[ClaimedJob], worker_id: str, lease_seconds: float
    ) -> Renewal:
        rows = await self.db.fetch(
            self._q.heartbeat, [j.id for j in jobs], _held(jobs), worker_id, lease_seconds,
            self.clock.now(),
        )  # fmt: skip
        return Renewal(
            lost=_fenced_out(jobs, rows),
            cancel_requested=[row["id"] for row in rows if row["cancel_requested"]],
        )

    async def progress(self, *, reports: Sequence[ProgressReport], worker_id: str) -> int:
        """Write each running attempt's latest report; return how many were written."""
        latest = {
            str(r.job.id): {
                "claim": r.job.claim,
                "fraction": r.fraction,
                "message": r.message,
            }
            for r in reports
        }
        rows = await self.db.fetch(
            self._q.progress, [r.job.id for r in reports], json.dumps(latest), worker_id,
            self.clock.now(),
        )  # fmt: skip
        return len(rows)

    async def job_log_append(self, *, chunks: Sequence[LogChunk], worker_id: str) -> int:
        """Append each running attempt's new log lines; return how many attempts were
        written (the others were no longer held by this worker)."""
        entries = {
            str(c.job.id): {
                "claim": c.job.claim,
                "log": c.text,
                "truncated": c.truncated,
            }
            for c in chunks
        }
        rows = await self.db.fetch(
            self._q.job_log_append, [c.job.id for c in chunks], json.dumps(entries), worker_id
        )
        return len(rows)

    async def job_log_size(self, *, job_id: int) -> tuple[int, bool]:
        """The bytes the running attempt of ``job_id`` has logged, and whether its log
        was cut at its bound; (0, False) before its first line."""
        row = await self.db.fetchrow(self._q.job_log_size, job_id)
        return (0, False) if row is None else (row["size"], row["truncated"])

    # -- reading jobs ------------------------------------------------------------------

    async def get_job(self, *, job_id: int) -> Job | None:
        record = await self.db.fetchrow(self._q.get_job, job_id)
        return None if record is None else Job.from_record(record)

    async def queue_waiting(self, *, queue: str, limit: int) -> list[Job]:
        """The first ``limit`` pending jobs of ``queue``: the due ones in the order
        workers claim them, then those due later, soonest first."""
        records = await self.db.fetch(self._q.queue_waiting, queue, limit, self.clock.now())
        return [Job.from_record(r) for r in records]

    async def queues_later(
        self, *, queues: Sequence[str], limit: int
    ) -> dict[str, tuple[int, int]]:
        """Each of ``queues``' pending jobs due later, as (scheduled, retrying): never
        tried, and waiting to retry. At most ``limit`` are counted per queue; a queue
        with none is left out."""
        records = await self.db.fetch(self._q.queues_later, list(queues), limit, self.clock.now())
        return {r["name"]: (r["scheduled"], r["retrying"]) for r in records}

    async def workers_jobs(self, *, limit: int) -> list[Job]:
        """The jobs running now (up to ``limit``), by worker, oldest start first."""
        return [Job.from_record(r) for r in await self.db.fetch(self._q.workers_jobs, limit)]

    async def jobs_count_bounded(
        self,
        *,
        statuses: Sequence[str],
        types: Sequence[str] | None,
        queues: Sequence[str] | None,
        limit: int,
    ) -> int:
        """How many jobs match, counted up to ``limit`` at most."""
        count: int = await self.db.fetchval(
            self._q.jobs_count_bounded, list(statuses), _list(types), _list(queues), limit
        )
        return count

    async def job_attempts(self, *, job_id: int) -> list[Attempt]:
        records = await self.db.fetch(self._q.job_attempts, job_id)
        return [Attempt(**dict(r.items())) for r in records]

    async def jobs_changed_since(self, *, since: datetime) -> list[Job]:
        records = await self.db.fetch(self._q.jobs_changed_since, since)
        return [Job.from_record(r) for r in records]

    async def jobs_due_or_running(self) -> bool:
        return bool(await self.db.fetchval(self._q.jobs_due_or_running, self.clock.now()))

    async def clock_now(self) -> datetime:
        """The time the queries take as now: the clock's, else the database's."""
        now: datetime = await self.db.fetchval(self._q.clock, self.clock.now())
        return now

    # -- job control -------------------------------------------------------------------

    async def job_update(
        self,
        *,
        job_id: int,
        run_at: datetime | None,
        delay_seconds: float | None,
        priority: int | None,
        queue: str | None,
        max_attempts: int | None,
        payload: str | None,
        tags: list[str] | None = None,
        meta: str | None = None,
    ) -> Job | None:
        """The job changed, if it was pending; None leaves a field as it is, and tags
        ``[]`` or metadata ``"{}"`` (JSON text) remove them."""
        record = await self.db.fetchrow(
            self._q.job_update, job_id, run_at, delay_seconds, priority, queue, max_attempts,
            payload, self.clock.now(), None if tags is None else json.dumps(tags), meta,
        )  # fmt: skip
        return None if record is None else Job.from_record(record)

    async def job_run_now(self, *, job_id: int) -> Job | None:
        """The job made due now, if it was pending and due later."""
        record = await self.db.fetchrow(self._q.job_run_now, job_id, self.clock.now())
        return None if record is None else Job.from_record(record)

    async def job_delete(self, *, job_id: int) -> bool:
        """Whether the job was deleted (not running, of no workflow)."""
        return await self.db.fetchval(self._q.job_delete, job_id) is not None

    async def retry_jobs(
        self,
        *,
        job_id: int | None = None,
        type: str | None = None,
        queue: str | None = None,
        finished_after: datetime | None = None,
        finished_before: datetime | None = None,
        states: Sequence[JobStatus],
        limit: int,
    ) -> list[int]:
        """Make up to ``limit`` jobs in ``states`` (failed, cancelled) that match every
        filter given pending again; return their ids."""
        rows = await self.db.fetch(
            self._q.retry_jobs, job_id, type, queue, finished_after, finished_before,
            list(states), limit, self.clock.now(),
        )  # fmt: skip
        return [row["id"] for row in rows]

    async def cancel_jobs(
        self,
        *,
        job_id: int | None = None,
        type: str | None = None,
        queue: str | None = None,
        limit: int,
    ) -> list[Cancelled]:
        """Cancel up to ``limit`` pending jobs matching every filter given, and ask the
        running ones to stop."""
        rows = await self.db.fetch(
            self._q.cancel_jobs, job_id, type, queue, limit, self.clock.now()
        )
        return [Cancelled(row["id"], row["status"]) for row in rows]


class OnConnection:
    """``async with store.connection() as store:``, the store on one pooled connection
    until the block ends. A class, not contextlib's generator: the claim of an idle
    worker's job is on the path of its start, and the generator's machinery was about
    15 us of it."""

    __slots__ = ("_acquire", "_store")

    def __init__(self, store: Store) -> None:
        self._store = store
        self._acquire = store.pool.acquire()

    async def __aenter__(self) -> Store:
        return self._store.on(await self._acquire.__aenter__())

    async def __aexit__(self, *exc: object) -> None:
        await self._acquire.__aexit__(*exc)
