"""JobQueue: the Python API. Register tasks, enqueue jobs, read them back.

jq = JobQueue()                         # DATABASE_URL, or the embedded default

@jq.task("send_email", max_attempts=5, queue="mail")
async def send_email(payload: dict) -> None: ...

job = await jq.enqueue("send_email", {"to": "a@b.c"})
job = jq.enqueue_sync("send_email", {"to": "a@b.c"})   # from sync code

A facade: tasks live in jobqueue.task, rows are built by jobqueue.enqueue.rows, the
database and what is open on it in jobqueue.database, queries in jobqueue.db.store,
job control in jobqueue.control, the sync API's loop in jobqueue.sync_bridge; what
the dashboard and the CLI read besides (``jq.inspect``) in jobqueue.inspection, and
API tokens (``jq.tokens``) in jobqueue.auth.admin. Nothing above this facade opens
the store itself.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

import asyncpg

from jobqueue import config, control, job_edits, logs, observability, settings_parsing
from jobqueue.audit import Actor
from jobqueue.auth.admin import TokenAdmin
from jobqueue.config import Settings
from jobqueue.database import Connected
from jobqueue.db.connections import (
    AppConnection,
    run_blocking,
    sync_executor_for,
)
from jobqueue.db.pool import raises_unavailable, unavailable_raised
from jobqueue.db.records import JobRow, UniqueKey
from jobqueue.db.store import Store
from jobqueue.durable import signals
from jobqueue.durable.detail import detail as durable_detail
from jobqueue.enqueue.enqueuer import insert, insert_jobs, insert_many, opened
from jobqueue.enqueue.rows import Rows
from jobqueue.http_workers.service import HttpWorkers
from jobqueue.inspection import Inspector
from jobqueue.job_types import DeclaredTypes
from jobqueue.model import fields
from jobqueue.model.job import RETRYABLE_STATES, Attempt, Job, JobStatus, QueueInfo, WorkerInfo
from jobqueue.model.options import EnqueueOptions, ManyOptions
from jobqueue.model.search import JobFilter
from jobqueue.model.steps import JobDetail
from jobqueue.observability import trace_context
from jobqueue.retry import RetryPolicy
from jobqueue.schedules.control import Schedules
from jobqueue.task import Task, TaskDecorator, task_decorator
from jobqueue.worker.worker import Worker, in_process, worker_settings
from jobqueue.workflows import store as workflows_store
from jobqueue.workflows.builder import WorkflowBuilder
from jobqueue.workflows.model import CreatedWorkflow, OnFailure, Workflow, WorkflowSummary
from jobqueue.workflows.plan import Planned

if TYPE_CHECKING:
    from jobqueue.enqueue.idempotency import IdempotencyKey
    from jobqueue.enqueue.new_job import NewJob
    from jobqueue.waiter import Waiter
    from jobqueue.workflows.schema import NewWorkflow

__all__ = ["AppConnection", "JobQueue", "Task"]

T = TypeVar("T")


class JobQueue(Connected):
    """Tasks plus a connection to the queue's database (jobqueue.database.Connected).

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
            settings = dataclasses.replace(
                settings, schema=settings_parsing.schema_name("schema", schema)
            )
        self.tasks: dict[str, Task[Any, Any]] = {}
        super().__init__(settings)
        self.settings = settings
        # Set by jobqueue.testing.inline: runs the due jobs right after an enqueue.
        self.after_enqueue: Callable[[], Awaitable[None]] | None = None
        # What the dashboard, the API and the CLI read and change besides jobs and
        # queues, each a small service on this queue's store.
        self.inspect = Inspector(self)
        self.tokens = TokenAdmin(self.store)
        # Job types declared ahead of any worker (`jobqueue types`).
        self.types = DeclaredTypes(self.store)
        # Periodic jobs as data, changed at run time (docs/schedules.md).
        self.schedules = Schedules(self.store, lambda: self._rows)
        # Workers in other languages, over HTTP (docs/http-workers.md).
        self.http_workers = HttpWorkers(self)

    @property
    def settings(self) -> Settings:
        return self._settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        # Replaceable, as tests do: what the rows and the next pool are built from too.
        self._settings = settings
        logs.use_level(settings.log_level)
        self._rows = Rows(self.tasks, settings)
        self._database.settings = settings

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
        concurrency_key: str | None = None,
    ) -> TaskDecorator:
        """Register the decorated function (sync or async) as the handler of ``type``,
        and return it as a Task (see jobqueue.task: typed payloads, ``.enqueue()``).

        ``timeout``: seconds an attempt may run (default JOBQUEUE_JOB_TIMEOUT, else none).
        ``isolated``: run each attempt of this sync handler in a child process, so that a
        timeout or shutdown can kill it (see jobqueue.worker.isolation for the cost).
        ``retry``: ``(attempt) -> seconds`` before the next attempt (see jobqueue.retry);
        default: exponential backoff from RETRY_DELAY_SECONDS.
        ``cron``: also enqueue a job of this type at every tick of this cron expression,
        read in ``cron_timezone`` (see jobqueue.schedules.runner).
        ``concurrency_key``: the payload field whose value is each job's concurrency
        key, for the queue's key limits (docs/limits.md).
        """
        return task_decorator(
            self.tasks,
            self,
            type,
            queue=queue,
            max_attempts=max_attempts,
            priority=priority,
            timeout=timeout,
            isolated=isolated,
            retry=retry,
            cron=cron,
            cron_timezone=cron_timezone,
            concurrency_key=concurrency_key,
        )

    def queue_names(self) -> set[str]:
        return {t.queue for t in self.tasks.values() if t.queue}

    async def close(self) -> None:
        """Close this loop's pool (and the sync API's), and stop an embedded server we own."""
        await self.http_workers.close()
        await super().close()

    # -- running jobs in this process ----------------------------------------------

    @contextlib.asynccontextmanager
    async def worker(
        self,
        *,
        queues: Iterable[str] | None = None,
        concurrency: int | None = None,
        claim_any_type: bool | None = None,
    ) -> AsyncIterator[Worker]:
        """Run a worker in this event loop while the block runs, as ``jobqueue worker``
        does in a process of its own: the same settings (``jq.settings``), the schema
        migrated first if JOBQUEUE_MIGRATE is on, and a graceful stop when the block
        ends (running jobs get SHUTDOWN_TIMEOUT_SECONDS, what is left is handed back)::

            async with jq.worker(queues=["mail=10", "default"], concurrency=20):
                ...  # jobs run meanwhile

        ``queues``: the queues it serves besides its tasks' (``mail=10`` caps one), as
        JOBQUEUE_QUEUES; ``concurrency``: jobs at once, as WORKER_COUNT;
        ``claim_any_type``: claim jobs of every type, failing those this JobQueue has no
        task for, as JOBQUEUE_CLAIM_ANY_TYPE (by default it claims only its tasks' types,
        and leaves the others pending for the workers that have them). A bad value
        raises ConfigError (a ValueError) naming it.
        """
        settings = worker_settings(
            self.settings, queues=queues, concurrency=concurrency, claim_any_type=claim_any_type
        )
        async with contextlib.AsyncExitStack() as stack:
            with unavailable_raised():  # starting it; the block's own errors stay its
                if settings.migrate:
                    await self.migrate()
                dsn = await self._database.resolved_direct_dsn()
                pool = await self.pool()
                worker = await stack.enter_async_context(
                    in_process(pool, dsn, settings, self.tasks, clock=self.clock)
                )
            yield worker

    # -- enqueueing --------------------------------------------------------------

    async def enqueue(
        self,
        type: str,
        payload: Any = None,
        *,
        conn: AppConnection | None = None,
        **options: Unpack[EnqueueOptions],
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

        When the database cannot be reached (without ``conn``): EnqueueFailed if nothing
        was stored, EnqueueOutcomeUnknown if the connection died once the job was sent,
        so that it may be stored; retry that one with a ``unique_key`` (jobqueue.model.errors).

        ``options`` (jobqueue.model.options.EnqueueOptions): ``queue``, ``priority``,
        ``max_attempts``, ``run_at`` or ``delay_seconds``, ``unique_key`` and
        ``unique_for``, and ``concurrency_key``, the job's key for its queue's key limits
        (default: the value of its task's ``concurrency_key`` payload field;
        docs/limits.md). Each left out (or None) is its task's default, else the
        settings'.
        """
        row = self._rows.row(type, payload, options, trace_context.recorded())
        job, _ = await self._insert(row, UniqueKey.of_options(options), conn)
        if self.after_enqueue is not None and conn is None:
            await self.after_enqueue()
            return await self.get(job.id) or job
        return job

    async def enqueue_job(
        self,
        spec: NewJob,
        *,
        conn: asyncpg.Connection | None = None,
        headers: Mapping[str, str | None] | None = None,
        idempotency_key: IdempotencyKey | None = None,
    ) -> tuple[Job, bool]:
        """Store a job described by a validated NewJob (what POST /jobs receives); return
        it and whether it is new (False: the holder of its unique key, or the job its
        idempotency key names, see jobqueue.enqueue.idempotency). ``headers``: the request's W3C
        trace context, recorded when no span is active."""
        row = self._rows.row_of(spec, trace_context.recorded(headers))
        unique = UniqueKey.of(spec.unique_key, spec.unique_for, spec.on_conflict)
        return await self._insert(row, unique, conn, idempotency_key)

    async def _insert(
        self,
        row: JobRow,
        unique: UniqueKey | None,
        conn: AppConnection | None,
        idem: IdempotencyKey | None = None,
    ) -> tuple[Job, bool]:
        if conn is None and unique is None and idem is None:
            # The hot path, inline: shared with the concurrent calls of this loop.
            resources = self._database.current()
            if resources is None:
                resources = await opened(self._database.resources())
            job, created = await resources.enqueuer.insert(row), True
        else:
            job, created = await self._database.insert(row, unique, conn, idem)
        if created:
            observability.enqueued([row])
        return job, created

    async def enqueue_many(
        self,
        type: str,
        payloads: Iterable[Any],
        *,
        conn: asyncpg.Connection | None = None,
        **options: Unpack[ManyOptions],
    ) -> list[int]:
        """Store one job of ``type`` per payload, all or none, in one statement; return
        their ids in order. Workers are woken once per batch, not once per job. An outage
        raises EnqueueFailed or EnqueueOutcomeUnknown, as ``enqueue`` does.
        ``options``: ``enqueue``'s, every job's, but ``unique_keys``: one per payload
        (None: none), each stored as ``enqueue`` stores a keyed job, in the batch's
        transaction, its id the holder's where the key is taken; ``concurrency_key``:
        every job's key (default: each payload's own, as its task names it)."""
        batch = self._rows.batch(type, payloads, options)
        if not batch.payloads:
            return []
        trace = trace_context.recorded(bulk=True)
        ids, stored = await self._database.write(conn, lambda db: insert_many(db, batch, trace))
        observability.enqueued([batch.options], stored)  # not those whose key was taken
        if self.after_enqueue is not None and conn is None:
            await self.after_enqueue()
        return ids

    async def enqueue_jobs(
        self,
        specs: Sequence[NewJob],
        *,
        conn: asyncpg.Connection | None = None,
        headers: Mapping[str, str | None] | None = None,
    ) -> list[int]:
        """Store jobs of any types and options, all or none, in one statement; return
        their ids in order. A job with a unique key is stored as ``enqueue`` stores it,
        in the batch's transaction: where its key is taken, its id is the holder's (as
        it was, or changed by its ``on_conflict``). An outage raises as ``enqueue_many``
        does."""
        trace = trace_context.recorded(headers, bulk=True)
        rows = [self._rows.row_of(spec, trace) for spec in specs]
        if not rows:
            return []
        uniques = [UniqueKey.of(s.unique_key, s.unique_for, s.on_conflict) for s in specs]
        ids, stored = await self._database.write(conn, lambda db: insert_jobs(db, rows, uniques))
        observability.enqueued(stored)  # not those whose unique key was taken
        return ids

    # -- reading jobs --------------------------------------------------------------

    @raises_unavailable
    async def get(self, job_id: int) -> Job | None:
        return await (await self.store()).get_job(job_id=job_id)

    @raises_unavailable
    async def detail(self, job: Job) -> JobDetail:
        """``job`` with its steps, what it waits for, its parent, children (docs/durable.md)."""
        return await durable_detail(await self.store(), job)

    async def wait(self, job_id: int, timeout: float | None = None) -> Job:
        """The job once it is completed, failed or cancelled (at once if it already is).

        Woken by the database's announcement of the job's end (LISTEN), with a slow
        fallback read (see jobqueue.waiter); no polling loop. Raises JobNotFound, or
        TimeoutError if the job is still pending or running after ``timeout`` seconds
        (None: wait as long as it takes). A failed job is returned, not raised: its
        ``last_error`` says why.
        """
        return await (await self.waiter()).wait(job_id, timeout)

    @raises_unavailable
    async def waiter(self) -> Waiter:
        """This event loop's Waiter (see jobqueue.waiter), made on first use."""
        return await self._database.waiter()

    @raises_unavailable
    async def list(
        self,
        *,
        status: JobStatus | str | None = None,
        type: str | Sequence[str] | None = None,
        queue: str | Sequence[str] | None = None,
        tag: str | Sequence[str] | None = None,
        meta: Mapping[str, Any] | None = None,
        payload: Mapping[str, Any] | None = None,
        after: int | None = None,
        limit: int = 50,
    ) -> list[Job]:
        """Jobs newest first; pass the last id of a page as ``after`` for the next page.
        ``type``, ``queue``: any of these; ``tag``: all of these; ``meta``, ``payload``: an
        object it contains, the payload within the newest 10,000 (docs/search.md)."""
        where = JobFilter(
            JobStatus(status) if status is not None else None,
            [type] if isinstance(type, str) else type,
            [queue] if isinstance(queue, str) else queue,
            [tag] if isinstance(tag, str) else tag, meta, payload,
        )  # fmt: skip
        return (await self.inspect.jobs(where, after=after, limit=limit)).jobs

    @raises_unavailable
    async def attempts(self, job_id: int) -> builtins.list[Attempt]:
        """The job's attempts, oldest first: every failed one (error, traceback, worker,
        timing) and any other that logged, each with what its handler logged (``log``)."""
        return await (await self.store()).job_attempts(job_id=job_id)

    @raises_unavailable
    async def workers(self) -> builtins.list[WorkerInfo]:
        """Worker processes that have announced themselves, oldest first."""
        return await (await self.store()).workers_list()

    # -- job control ---------------------------------------------------------------

    @raises_unavailable
    async def retry(self, job_id: int, *, by: Actor | None = None) -> Job:
        """Make a failed or cancelled job pending again, with fresh attempts, to run now.

        Raises JobNotFound, or JobStateError for a job in any other state (a pending or
        running job will run anyway; a completed one must not run twice by accident).
        ``by``: who acts, for the audit log (None: no row); so for every control call.
        """
        return await control.retry(await self.store(), job_id, by=by)

    @raises_unavailable
    async def retry_many(
        self,
        *,
        type: str | None = None,
        queue: str | None = None,
        finished_after: datetime | None = None,
        finished_before: datetime | None = None,
        statuses: Iterable[JobStatus | str] = RETRYABLE_STATES,
        by: Actor | None = None,
    ) -> int:
        """Retry every failed (and cancelled) job matching all the filters given; return
        how many. Runs in batches (jobqueue.control.BATCH), so that no statement locks
        them all."""
        return await control.retry_many(
            await self.store(),
            type=type,
            queue=queue,
            finished_after=finished_after,
            finished_before=finished_before,
            statuses=statuses,
            by=by,
        )

    @raises_unavailable
    async def cancel(self, job_id: int, *, by: Actor | None = None) -> Job:
        """Cancel a job: a pending one is ``cancelled`` at once; a running one is asked to
        stop (``cancel_requested_at`` is set) and its worker ends it ``cancelled`` within
        moments, never to be retried. Raises JobNotFound, or JobStateError for a job
        that already ended."""
        return await control.cancel(await self.store(), job_id, by=by)

    @raises_unavailable
    async def update_job(self, job_id: int, *, by: Actor | None = None, **changes: Any) -> Job:
        """Change a pending job's fields as PATCH /jobs/{id} does (docs/job-edits.md);
        JobStateError once it runs."""
        return await job_edits.update(await self.store(), self._rows, job_id, changes, by=by)

    @raises_unavailable
    async def run_now(self, job_id: int, *, by: Actor | None = None) -> Job:
        """Make a scheduled or retrying job due now; a due one is left as it is."""
        return await job_edits.run_now(await self.store(), job_id, by=by)

    @raises_unavailable
    async def delete_job(self, job_id: int, *, by: Actor | None = None) -> None:
        """Delete a job that is not running, nor of a workflow, with its history."""
        await job_edits.delete(await self.store(), job_id, by=by)

    @raises_unavailable
    async def signal(
        self, job_id: int, name: str, payload: Any = None, *, by: Actor | None = None
    ) -> int:
        """Send the job a signal for its ``ctx.wait_for_signal(name)``, kept if it does not
        wait yet (docs/durable.md#signals); its id. SignalRefused: no job, or ended."""
        store, limit = await self.store(), self.settings.max_result_bytes
        return await signals.send(store, job_id, name, payload, limit, by)

    @raises_unavailable
    async def cancel_many(
        self, *, type: str | None = None, queue: str | None = None, by: Actor | None = None
    ) -> dict[str, int]:
        """Cancel every pending and running job matching all the filters given, in batches;
        return how many were cancelled at once (pending) and how many asked to stop."""
        return await control.cancel_many(await self.store(), type=type, queue=queue, by=by)

    # -- workflows (jobqueue.workflows) ------------------------------------------------

    def workflow(
        self, name: str | None = None, *, on_failure: OnFailure = "cancel"
    ) -> WorkflowBuilder:
        """A workflow to build node by node, then ``await wf.enqueue()`` (docs/workflows.md)."""
        return WorkflowBuilder(self._rows, self._create_workflow, name, on_failure=on_failure)

    async def enqueue_workflow(
        self,
        spec: NewWorkflow,
        *,
        conn: asyncpg.Connection | None = None,
        headers: Mapping[str, str | None] | None = None,
    ) -> CreatedWorkflow:
        """Store a workflow POST /workflows described (WorkflowError: nothing stored)."""
        from jobqueue.workflows.schema import planned_of  # pydantic: off the worker path

        jobs = planned_of(spec, self._rows, trace_context.recorded(headers, bulk=True))
        return await self._create_workflow(spec.name, jobs, conn)

    async def _create_workflow(
        self, name: str | None, jobs: builtins.list[Planned], conn: AppConnection | None
    ) -> CreatedWorkflow:
        created = await self._database.write(
            conn, lambda store: workflows_store.create(store, name, jobs)
        )
        observability.enqueued([p.row for p in jobs])
        observability.workflow_created(name)
        return created

    @raises_unavailable
    async def get_workflow(self, workflow_id: int) -> Workflow | None:
        """The workflow and every node's job, or None."""
        return await workflows_store.get(await self.store(), workflow_id)

    @raises_unavailable
    async def list_workflows(self, limit: int = 20) -> builtins.list[WorkflowSummary]:
        """The ``limit`` newest workflows, newest first, with their jobs counted by state."""
        return await workflows_store.recent(await self.store(), limit)

    @raises_unavailable
    async def cancel_workflow(
        self, workflow_id: int, *, by: Actor | None = None
    ) -> Workflow | None:
        """Cancel every job of the workflow not ended yet (running ones are asked to
        stop); the workflow then, or None if there is none."""
        return await workflows_store.cancel(await self.store(), workflow_id, by=by)

    # -- queues ------------------------------------------------------------------

    @raises_unavailable
    async def queues(self) -> builtins.list[QueueInfo]:
        """Every queue with jobs or controls, by name."""
        return await control.queues(await self.store(), self.settings.lease_seconds)

    @raises_unavailable
    async def queue(self, name: str) -> QueueInfo:
        """One queue; a queue with no job and no control shows zeros."""
        fields.check_options(queue=name)
        return await control.queue(await self.store(), name, self.settings.lease_seconds)

    @raises_unavailable
    async def pause(self, name: str, *, by: Actor | None = None) -> QueueInfo:
        """Stop every worker from starting jobs of this queue (running ones finish);
        the queue keeps accepting jobs."""
        fields.check_options(queue=name)
        await control.pause(await self.store(), name, by=by)
        return await self.queue(name)

    @raises_unavailable
    async def set_limits(
        self, name: str, *, by: Actor | None = None, **limits: int | str | None
    ) -> QueueInfo:
        """Set limits shared by every worker on queue ``name`` (docs/limits.md):
        ``global_limit``, ``key_limit`` (jobs running at once), ``rate_limit``,
        ``key_rate_limit`` (starts per period, "100/m"); None removes one."""
        fields.check_options(queue=name)
        await control.set_limits(await self.store(), name, limits, by=by)
        return await self.queue(name)

    @raises_unavailable
    async def resume(self, name: str, *, by: Actor | None = None) -> QueueInfo:
        """Let workers start this queue's jobs again, at once."""
        fields.check_options(queue=name)
        await control.resume(await self.store(), name, by=by)
        return await self.queue(name)

    # -- the sync API ------------------------------------------------------------

    def enqueue_sync(
        self,
        type: str,
        payload: Any = None,
        *,
        conn: Any = None,
        **options: Unpack[EnqueueOptions],
    ) -> Job:
        """``enqueue`` for code without an event loop (scripts, WSGI apps, threads).

        ``conn``: a psycopg 3 connection, a SQLAlchemy Session over one, or Django's
        ``django.db.connection`` (psycopg 3 backend), inside the application's
        transaction; the job exists exactly when that transaction commits (run in the
        caller's thread, on the caller's connection). ``options``: ``enqueue``'s.
        """
        if conn is None:
            return self._sync.run(self.enqueue(type, payload, **options))
        row = self._rows.row(type, payload, options, trace_context.recorded())
        store = Store(sync_executor_for(conn), self.settings.schema, self.clock)
        return run_blocking(insert(store, row, UniqueKey.of_options(options)))[0]

    def get_sync(self, job_id: int) -> Job | None:
        return self._sync.run(self.get(job_id))

    def wait_sync(self, job_id: int, timeout: float | None = None) -> Job:
        """``wait`` for code without an event loop."""
        return self._sync.run(self.wait(job_id, timeout))

    def close_sync(self) -> None:
        self._sync.close()
        self._database.stop_embedded()
