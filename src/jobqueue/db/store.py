"""The store: every query of jobqueue as one typed method with keyword arguments.

Nothing else runs a query. Each method binds its arguments to its .sql file's
``$n`` placeholders in one place, so a caller never counts positions, and returns
typed records (jobqueue.job, jobqueue.db.records), never a driver's row. A test
checks that every .sql file has exactly one method here, and that nothing outside
this module runs SQL of its own.

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
from datetime import datetime, timedelta
from typing import Any, Protocol

import asyncpg
from asyncpg.transaction import Transaction

from jobqueue.audit_entry import AuditEntry
from jobqueue.db.records import (
    Cancelled,
    ClaimedJob,
    ClaimKey,
    Failure,
    JobOptions,
    JobRow,
    LogChunk,
    MinuteRow,
    NodeState,
    ParentResult,
    ProgressReport,
    RememberedKey,
    Renewal,
    Rescued,
    WorkflowCounts,
    WorkflowRow,
)
from jobqueue.db.sql import Queries, queries
from jobqueue.job import Attempt, Job, JobStatus, QueueInfo, WorkerInfo
from jobqueue.limits.model import LimitsInfo
from jobqueue.tokens import StoredToken, TokenInfo

# Jobs waiting for a handler are counted among this many pending jobs at the front of
# each queue (queue_unhandled.sql): a bounded read per queue for the gauge and GET
# /queues, where an exact count would cost every enqueue an index entry. More counts
# deeper into a backlog, for more reads every leader round.
UNHANDLED_WINDOW = 10_000


class Executor(Protocol):
    """What the store runs its queries on: asyncpg's Pool and Connection have it."""

    async def fetch(self, query: str, *args: Any) -> list[Any]: ...
    async def fetchrow(self, query: str, *args: Any) -> Any: ...
    async def fetchval(self, query: str, *args: Any) -> Any: ...
    async def execute(self, query: str, *args: Any) -> str: ...


class Clock:
    """The time the store's queries take as "now": the database's own unless set."""

    def __init__(self) -> None:
        self._at: datetime | None = None

    def now(self) -> datetime | None:
        """The time set, or None: the database's ``now()``."""
        return self._at

    def set(self, at: datetime) -> None:
        if at.tzinfo is None:
            raise ValueError("the clock takes an aware datetime")
        self._at = at

    def advance(self, seconds: float) -> None:
        if self._at is None:
            raise RuntimeError("set the clock before advancing it")
        self._at += timedelta(seconds=seconds)

    def reset(self) -> None:
        self._at = None


class Store:
    def __init__(self, db: Executor, schema: str, clock: Clock | None = None) -> None:
        self.db = db
        self.schema = schema
        self.clock = clock or Clock()
        self._q: Queries = queries(schema)

    def on(self, db: Executor) -> Store:
        """This store (schema and clock) on another connection."""
        return Store(db, self.schema, self.clock)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Store]:
        """This store on one connection of its pool, for several queries in a row."""
        async with self.pool.acquire() as conn:
            yield self.on(conn)

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
            self._q.enqueue, *_values(row), self.clock.now(), row.trace, row.concurrency_key
        )
        return Job.from_record(record)

    async def enqueue_rows(self, *, rows: Sequence[JobRow]) -> list[Job]:
        """Many rows in one statement, in order."""
        now = self.clock.now()
        columns = _columns(rows)
        traces = [r.trace for r in rows]
        keys = [r.concurrency_key for r in rows]
        return [
            Job.from_record(r)
            for r in await self.db.fetch(self._q.enqueue_rows, *columns, now, traces, keys)
        ]

    async def enqueue_payloads(
        self,
        *,
        options: JobOptions,
        payloads: Sequence[str],
        trace: str | None = None,
        keys: Sequence[str | None] | None = None,
    ) -> list[int]:
        """One job per payload (JSON text), all with the same options and trace context
        (JSON text, or None); their ids in order. ``keys``: each one's concurrency key."""
        o = options
        records = await self.db.fetch(
            self._q.enqueue_payloads,
            o.type, o.queue, list(payloads), o.priority, o.max_attempts, o.run_at,
            o.delay_seconds, self.clock.now(), trace, None if keys is None else list(keys),
        )  # fmt: skip
        return [r[0] for r in records]

    async def enqueue_unique(
        self, *, row: JobRow, unique_key: str, hold_seconds: float | None
    ) -> Job | None:
        """The job, stored if ``unique_key`` is free (None: it is held)."""
        record = await self.db.fetchrow(
            self._q.enqueue_unique, *_values(row), unique_key, hold_seconds, self.clock.now(),
            row.trace, row.concurrency_key,
        )  # fmt: skip
        return None if record is None else Job.from_record(record)

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
        done = [row for row in rows if not row[11]]
        handed = [ClaimedJob.from_record(row) for row in rows if row[11]]
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

    # -- the workers table -------------------------------------------------------------

    async def worker_register(
        self,
        *,
        worker_id: str,
        host: str,
        pid: int,
        queues: Sequence[str],
        slots: int,
        types: Sequence[str],
        any_type: bool,
    ) -> None:
        """Announce a worker: the queues it serves, the job types it has handlers for,
        and whether it claims jobs of every type (migration 0024)."""
        await self.db.execute(
            self._q.worker_register, worker_id, host, pid, list(queues), slots, self.clock.now(),
            list(types), any_type,
        )  # fmt: skip

    async def worker_heartbeat(self, *, worker_id: str) -> bool:
        """Renew the worker's row; False if it has none (forgotten: register again)."""
        renewed = await self.db.fetchval(self._q.worker_heartbeat, worker_id, self.clock.now())
        return renewed is not None

    async def worker_unregister(self, *, worker_id: str) -> None:
        await self.db.execute(self._q.worker_unregister, worker_id)

    async def workers_list(self) -> list[WorkerInfo]:
        return [WorkerInfo(**dict(r.items())) for r in await self.db.fetch(self._q.workers_list)]

    async def workers_prune(self, *, silent_seconds: float) -> list[str]:
        """Forget workers silent for ``silent_seconds``; return their ids."""
        rows = await self.db.fetch(self._q.workers_prune, silent_seconds, self.clock.now())
        return [row["id"] for row in rows]

    async def workers_types(self, *, within_seconds: float, queue: str) -> list[str]:
        """The job types that workers serving ``queue`` and heartbeating within the last
        ``within_seconds`` have handlers for, in order."""
        rows = await self.db.fetch(self._q.workers_types, within_seconds, queue, self.clock.now())
        return [row[0] for row in rows]

    async def workers_alive(self, *, within_seconds: float) -> int:
        """How many workers heartbeated within the last ``within_seconds``."""
        alive: int = await self.db.fetchval(self._q.workers_alive, within_seconds, self.clock.now())
        return alive

    # -- the leader's work ----------------------------------------------------------------

    async def leader_elect(self, *, role: str, leader_id: str, term_seconds: float) -> bool:
        """Take or renew the lead of ``role`` for ``term_seconds``; True if we hold it."""
        leader = await self.db.fetchval(
            self._q.leader_elect, role, leader_id, term_seconds, self.clock.now()
        )
        return leader is not None

    async def leader_holder(self, *, role: str) -> str | None:
        """The id of the process that holds the lead of ``role`` now, if any."""
        holder: str | None = await self.db.fetchval(self._q.leader_holder, role, self.clock.now())
        return holder

    async def leader_resign(self, *, role: str, leader_id: str) -> None:
        await self.db.execute(self._q.leader_resign, role, leader_id)

    async def rescue(self, *, limit: int) -> list[Rescued]:
        """Return up to ``limit`` jobs whose lease expired to the queue (or end them)."""
        rows = await self.db.fetch(self._q.rescue, limit, self.clock.now())
        return [
            Rescued(r["id"], r["status"], r["attempts"], r["max_attempts"], r["queue"], r["type"])
            for r in rows
        ]

    async def priority_age(self, *, step_seconds: float, limit: int) -> int:
        """Move up to ``limit`` waiting jobs up a priority step; return how many."""
        aged: int = await self.db.fetchval(
            self._q.priority_age, step_seconds, limit, self.clock.now()
        )
        return aged

    async def retention_delete(
        self, *, statuses: Sequence[str], older_than_seconds: float, limit: int
    ) -> int:
        """Delete up to ``limit`` jobs finished in ``statuses`` longer ago than
        ``older_than_seconds``; return how many."""
        status = await self.db.execute(
            self._q.retention_delete, list(statuses), older_than_seconds, limit, self.clock.now()
        )
        return _count(status)

    async def unique_keys_expire(self, *, limit: int) -> int:
        """Delete up to ``limit`` unique keys whose hold has ended; return how many."""
        return _count(await self.db.execute(self._q.unique_keys_expire, limit, self.clock.now()))

    async def idempotency_keys_expire(self, *, limit: int) -> int:
        """Delete up to ``limit`` idempotency keys past their expiry; return how many."""
        return _count(
            await self.db.execute(self._q.idempotency_keys_expire, limit, self.clock.now())
        )

    # -- reading jobs ------------------------------------------------------------------

    async def get_job(self, *, job_id: int) -> Job | None:
        record = await self.db.fetchrow(self._q.get_job, job_id)
        return None if record is None else Job.from_record(record)

    async def list_jobs(
        self,
        *,
        status: JobStatus | None,
        types: Sequence[str] | None,
        queues: Sequence[str] | None,
        before_id: int | None,
        limit: int,
    ) -> list[Job]:
        """Newest first; ``before_id`` pages on from the last id of the page before.
        ``types``, ``queues``: None for any."""
        records = await self.db.fetch(
            self._q.list_jobs, status, _list(types), _list(queues), before_id, limit
        )
        return [Job.from_record(r) for r in records]

    async def jobs_page(
        self,
        *,
        status: JobStatus | None,
        types: Sequence[str] | None,
        queues: Sequence[str] | None,
        created_since: datetime | None,
        created_before: datetime | None,
        before_id: int | None,
        limit: int,
        due: str | None = None,
    ) -> list[Job]:
        """The dashboard's list: as list_jobs, also bounded by creation time. ``due``:
        "due" (run_at passed), "scheduled" (due later, never tried) or "retrying" (due
        later, after a failed attempt); None for any."""
        records = await self.db.fetch(
            self._q.jobs_page,
            status,
            _list(types),
            _list(queues),
            created_since,
            created_before,
            before_id,
            limit,
            due,
            self.clock.now(),
        )
        return [Job.from_record(r) for r in records]

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

    # -- workflows (jobqueue.workflows) -------------------------------------------------

    async def workflow_create(self, *, name: str | None) -> int:
        workflow_id: int = await self.db.fetchval(self._q.workflow_create, name)
        return workflow_id

    async def workflow_insert_jobs(
        self, *, workflow_id: int, rows: Sequence[JobRow], nodes: Sequence[NodeState]
    ) -> list[int]:
        """A workflow's jobs without unique keys, in one statement; their ids in order."""
        columns = _columns(rows)
        records = await self.db.fetch(
            self._q.workflow_insert_jobs, *columns, self.clock.now(), [r.trace for r in rows],
            workflow_id, [n.ref for n in nodes], [n.status for n in nodes],
            [n.parents for n in nodes], [n.on_failure for n in nodes], [n.run_if for n in nodes],
            [r.concurrency_key for r in rows],
        )  # fmt: skip
        return [r[0] for r in records]

    async def workflow_adopt(self, *, job_id: int, workflow_id: int, node: NodeState) -> None:
        """Make a job stored under a unique key in this transaction a workflow's node."""
        await self.db.execute(
            self._q.workflow_adopt, job_id, workflow_id, node.ref, node.status, node.parents,
            node.on_failure, node.run_if,
        )  # fmt: skip

    async def workflow_insert_edges(
        self, *, children: Sequence[int], parents: Sequence[int]
    ) -> None:
        await self.db.execute(self._q.workflow_insert_edges, list(children), list(parents))

    async def workflow_get(self, *, workflow_id: int) -> WorkflowRow | None:
        record = await self.db.fetchrow(self._q.workflow_get, workflow_id)
        return None if record is None else WorkflowRow(**dict(record.items()))

    async def workflow_jobs(self, *, workflow_id: int) -> list[tuple[str, list[str], Job]]:
        """Every job of the workflow: its ref, the refs it waits for, the job."""
        records = await self.db.fetch(self._q.workflow_jobs, workflow_id)
        return [(r["workflow_ref"], list(r["depends_on"]), Job.from_record(r)) for r in records]

    async def workflow_list(self, *, limit: int) -> list[WorkflowCounts]:
        """The ``limit`` newest workflows, newest first, with their jobs' state counts."""
        records = await self.db.fetch(self._q.workflow_list, limit)
        return [WorkflowCounts(**dict(r.items())) for r in records]

    async def workflow_parent_results(self, *, job_id: int) -> list[ParentResult]:
        records = await self.db.fetch(self._q.workflow_parent_results, job_id)
        return [
            ParentResult(
                r["ref"], r["status"], None if r["result"] is None else json.loads(r["result"])
            )
            for r in records
        ]

    async def workflow_cancel(self, *, workflow_id: int) -> list[Cancelled]:
        """Cancel every job of the workflow not ended yet (a running one asked to stop)."""
        rows = await self.db.fetch(self._q.workflow_cancel, workflow_id, self.clock.now())
        return [Cancelled(row["id"], row["status"]) for row in rows]

    async def workflow_retention_delete(
        self, *, completed_seconds: float | None, failed_seconds: float | None, limit: int
    ) -> int:
        """Delete up to ``limit`` workflows whose every job is past its retention (None:
        jobs in those states are kept, and their workflows); return how many."""
        status = await self.db.execute(
            self._q.workflow_retention_delete, completed_seconds, failed_seconds, limit,
            self.clock.now(),
        )  # fmt: skip
        return _count(status)

    # -- queues ----------------------------------------------------------------------

    async def queues_overview(self, *, name: str | None = None) -> list[QueueInfo]:
        """Every queue with jobs or controls (or the one named), from the counters."""
        records = await self.db.fetch(self._q.queues_overview, name, self.clock.now())
        return [QueueInfo(**dict(r.items())) for r in records]

    async def queue_unhandled(
        self, *, within_seconds: float, window: int = UNHANDLED_WINDOW
    ) -> list[tuple[str, str, int]]:
        """(queue, type, pending jobs) for each pair that no worker heartbeating within
        the last ``within_seconds`` would claim (no handler among those serving the
        queue), counted among the first ``window`` pending jobs of each queue."""
        rows = await self.db.fetch(
            self._q.queue_unhandled, within_seconds, self.clock.now(), window
        )
        return [(row[0], row[1], row[2]) for row in rows]

    async def queue_limited(self, *, queues: Sequence[str]) -> dict[str, bool]:
        """Which of ``queues`` have limits shared by every worker: whether each has a rate."""
        records = await self.db.fetch(self._q.queue_limited, list(queues))
        return {r["name"]: r["rated"] for r in records}

    async def limit_next_start(self, *, queue: str) -> float | None:
        """Seconds until rate-limited ``queue`` may start a job again (None: now)."""
        seconds: float | None = await self.db.fetchval(
            self._q.limit_next_start, queue, self.clock.now()
        )
        return seconds

    async def queue_limits_set(self, *, name: str, columns: str) -> None:
        """Set the limits ``columns`` names (JSON text, migration 0020's columns)."""
        await self.db.execute(self._q.queue_limits_set, name, columns, self.clock.now())

    async def queue_limits_overview(self, *, name: str | None = None) -> dict[str, LimitsInfo]:
        """Each limited queue's limits and their use, by queue name."""
        records = await self.db.fetch(self._q.queue_limits_overview, name, self.clock.now())
        return {r["name"]: LimitsInfo.from_record(r) for r in records}

    async def queue_counts_fold(self, *, limit: int) -> int:
        """Fold up to ``limit`` counter changes into the per-queue totals; return how many."""
        folded: int = await self.db.fetchval(self._q.queue_counts_fold, limit)
        return folded

    async def queue_counts_rotate(self, *, min_pages: int) -> float | None:
        """Empty the counter changes' idle partition if it holds more than
        ``min_pages`` pages and no rows; return the seconds left in this turn if the
        partition taking its writes is past ``min_pages`` too, else None."""
        turn_ends_in: float | None = await self.db.fetchval(self._q.queue_counts_rotate, min_pages)
        return turn_ends_in

    async def queue_minutes_waits(self, *, grace_seconds: float, sample: int) -> int:
        """Set the waits of the minutes ended ``grace_seconds`` ago, from ``sample`` jobs
        each at most; return how many minute rows were set."""
        written: int = await self.db.fetchval(
            self._q.queue_minutes_waits, grace_seconds, sample, self.clock.now()
        )
        return written

    async def queue_minutes_prune(self, *, keep_seconds: float) -> int:
        return _count(
            await self.db.execute(self._q.queue_minutes_prune, keep_seconds, self.clock.now())
        )

    async def queue_minutes_read(
        self, *, since: datetime, queues: Sequence[str] | None, bucket_seconds: float
    ) -> list[MinuteRow]:
        records = await self.db.fetch(
            self._q.queue_minutes_read, since, _list(queues), bucket_seconds
        )
        return [MinuteRow(**dict(r.items())) for r in records]

    async def queue_pause(self, *, name: str) -> None:
        await self.db.execute(self._q.queue_pause, name, self.clock.now())

    async def queue_resume(self, *, name: str) -> None:
        await self.db.execute(self._q.queue_resume, name, self.clock.now())

    # -- the audit log ------------------------------------------------------------------

    async def audit_count(self, *, entry_id: int, add: int) -> None:
        """Add ``add`` jobs to the count of a bulk action's row."""
        await self.db.execute(self._q.audit_count, entry_id, add)

    async def audit_expire(self, *, older_than_seconds: float, limit: int) -> int:
        """Delete up to ``limit`` rows older than ``older_than_seconds``; return how many."""
        status = await self.db.execute(
            self._q.audit_expire, older_than_seconds, limit, self.clock.now()
        )
        return _count(status)

    async def audit_insert(
        self,
        *,
        actor: str,
        action: str,
        target: str | None,
        filter: str | None,
        count: int | None,
        client: str | None,
        result: str,
    ) -> int:
        """One row (``filter``: JSON text); its id."""
        entry_id: int = await self.db.fetchval(
            self._q.audit_insert, actor, action, target, filter, count, client, result,
            self.clock.now(),
        )  # fmt: skip
        return entry_id

    async def audit_list(
        self, *, actor: str | None, action: str | None, before_id: int | None, limit: int
    ) -> list[AuditEntry]:
        """Newest first; ``before_id`` pages on from the last id of the page before."""
        records = await self.db.fetch(self._q.audit_list, actor, action, before_id, limit)
        return [AuditEntry.from_record(r) for r in records]

    # -- the schema and its migrations ----------------------------------------------------

    async def ping(self) -> None:
        await self.db.execute(self._q.ping)

    async def migration_lock(self, *, key: int) -> None:
        """Wait for the lock ``key``, held until this transaction ends."""
        await self.db.execute(self._q.migration_lock, key)

    # -- API tokens ----------------------------------------------------------------------

    async def token_create(
        self, *, token: StoredToken, expires_in_seconds: float | None
    ) -> TokenInfo | None:
        """Store ``token``; None when an unrevoked token already has its name."""
        record = await self.db.fetchrow(
            self._q.token_create, token.key_id, token.name, token.secret_hash,
            list(token.scopes), _or_none(token.queues), _or_none(token.types),
            self.clock.now(), expires_in_seconds,
        )  # fmt: skip
        return None if record is None else TokenInfo.from_record(record)

    async def token_revoke(self, *, name: str) -> TokenInfo | None:
        record = await self.db.fetchrow(self._q.token_revoke, name, self.clock.now())
        return None if record is None else TokenInfo.from_record(record)

    async def tokens_list(self) -> list[StoredToken]:
        return [StoredToken.from_record(r) for r in await self.db.fetch(self._q.tokens_list)]

    async def tokens_active_exist(self) -> bool:
        """Whether an unrevoked, unexpired token exists; raises UndefinedTableError on a
        schema not migrated yet."""
        found: bool = await self.db.fetchval(self._q.tokens_active_exist, self.clock.now())
        return found

    async def schema_create(self) -> None:
        await self.db.execute(self._q.schema_create)

    async def migrations_create(self) -> None:
        await self.db.execute(self._q.migrations_create)

    async def migrations_applied(self) -> set[int]:
        return {row["version"] for row in await self.db.fetch(self._q.migrations_applied)}

    async def migrations_record(self, *, version: int, name: str) -> None:
        await self.db.execute(self._q.migrations_record, version, name)

    async def schema_tables(self) -> set[str]:
        """The names of the schema's tables."""
        return {row["name"] for row in await self.db.fetch(self._q.schema_tables)}


def _columns(rows: Sequence[JobRow]) -> list[list[Any]]:
    """Rows as the column arrays of the first seven placeholders of the queries that
    insert many (enqueue_rows.sql, workflow_insert_jobs.sql)."""
    return [
        [r.type for r in rows],
        [r.queue for r in rows],
        [r.payload for r in rows],
        [r.priority for r in rows],
        [r.max_attempts for r in rows],
        [r.run_at for r in rows],
        [r.delay_seconds for r in rows],
    ]


def _values(row: JobRow) -> tuple[Any, ...]:
    """A row in the order of the enqueue queries' first seven placeholders."""
    return (
        row.type, row.queue, row.payload, row.priority, row.max_attempts, row.run_at,
        row.delay_seconds,
    )  # fmt: skip


def _held(jobs: Sequence[ClaimedJob]) -> str:
    """The claims a fenced write says it holds, as the JSON object its SQL takes:
    ``{"<job id>": claim token, ...}`` (see db/queries/complete.sql for why not an
    array)."""
    return "{" + ",".join([f'"{j.id}":{_json_int(j.claim)}' for j in jobs]) + "}"


def _json_int(value: int | None) -> str:
    return "null" if value is None else str(value)


def _fenced_out(jobs: Sequence[ClaimedJob], changed: Sequence[Any]) -> list[ClaimedJob]:
    """The jobs a fenced write did not change (``changed``: the rows it returned, each
    with an ``id``): they were taken from this worker meanwhile."""
    if len(changed) == len(jobs):
        return []
    ids = {row["id"] for row in changed}
    return [job for job in jobs if job.id not in ids]


def _list(values: Sequence[str] | None) -> list[str] | None:
    return None if values is None else list(values)


def _or_none(values: frozenset[str] | None) -> list[str] | None:
    return None if values is None else sorted(values)


def _count(status: str) -> int:
    """The rows a DELETE or UPDATE touched, from its status ("DELETE 12")."""
    return int(status.split()[-1])
