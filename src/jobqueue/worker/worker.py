"""A worker process's job machinery: producer, executor, completer, listener, heartbeat
and the leader's services, started and stopped together.

Shutdown: stop claiming; let running jobs finish within the grace period; cancel
what is left and hand it back without counting the attempt; write every outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import asyncpg

from jobqueue import config, control, gc_tuning, settings_parsing
from jobqueue.config import Settings
from jobqueue.db.listener import Listener
from jobqueue.db.query_base import Clock
from jobqueue.db.store import Store
from jobqueue.durable.steps import Durable
from jobqueue.enqueue.rows import Rows
from jobqueue.logs import get_logger
from jobqueue.maintenance import Leader
from jobqueue.observability import job_logs, observers
from jobqueue.retry import ExponentialBackoff
from jobqueue.schedules.runner import ScheduleRunner
from jobqueue.task import Task, schedules
from jobqueue.wakeups import RelayedListener
from jobqueue.worker.completer import Completer
from jobqueue.worker.executor import Executor
from jobqueue.worker.heartbeat import Heartbeat
from jobqueue.worker.producer import Producer
from jobqueue.worker.progress import ProgressWriter

log = get_logger("jobqueue.worker")

# How long shutdown may spend writing the last outcomes to an unreachable database.
FINAL_FLUSH_SECONDS = 5.0


@contextlib.asynccontextmanager
async def in_process(
    pool: asyncpg.Pool,
    dsn: str | None,
    settings: Settings,
    tasks: Mapping[str, Task[Any, Any]],
    *,
    clock: Clock | None = None,
) -> AsyncIterator[Worker]:
    """A Worker running in the caller's event loop until the block ends, then stopped
    as ``jobqueue worker`` stops on SIGTERM: no new claims, running jobs given
    SHUTDOWN_TIMEOUT_SECONDS, what is left handed back, every outcome written."""
    worker = Worker(pool, dsn, settings, tasks, clock=clock)
    await worker.start()
    try:
        yield worker
    finally:
        await worker.stop(asyncio.Event())


def worker_settings(
    settings: Settings,
    *,
    queues: Iterable[str] | None,
    concurrency: int | None,
    claim_any_type: bool | None = None,
) -> Settings:
    """``settings`` with the queues, the jobs at once and the claim of every type of
    ``jq.worker()``'s arguments, checked as the flags are (ConfigError naming the
    argument)."""
    if queues is not None:
        listed = [queues] if isinstance(queues, str) else list(queues)
        settings = dataclasses.replace(
            settings, queues=settings_parsing.queue_list("queues", ",".join(listed))
        )
    if concurrency is not None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise config.ConfigError(f"concurrency must be a positive integer, got {concurrency!r}")
        settings = dataclasses.replace(settings, worker_count=concurrency)
    if claim_any_type is not None:
        if not isinstance(claim_any_type, bool):
            raise config.ConfigError(
                f"claim_any_type must be True or False, got {claim_any_type!r}"
            )
        settings = dataclasses.replace(settings, claim_any_type=claim_any_type)
    return settings


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker:
    def __init__(
        self,
        pool: asyncpg.Pool,
        dsn: str | None,
        settings: Settings,
        tasks: Mapping[str, Task[Any, Any]],
        *,
        clock: Clock | None = None,
        relayed: bool = False,
    ) -> None:
        """``dsn``: where to LISTEN (None: poll-only, see Settings.poll_only).
        ``clock``: the time its queries take as now (a test's; default the database's).
        ``relayed``: wake-ups come from the supervisor (jobqueue.wakeups), not from a
        LISTEN connection of this process's own."""
        for task in tasks.values():
            task.prepare()
        store = Store(pool, settings.schema, clock)
        self.id = new_worker_id()
        limits = settings_parsing.queue_limits(settings.queues)
        queue_names = tuple(
            dict.fromkeys([*limits, *sorted({t.queue for t in tasks.values() if t.queue})])
        )
        # The types it claims: those it has handlers for, unless told to take every type
        # (the executor then fails the others for want of a handler).
        types = tuple(sorted(tasks))
        self.completer = Completer(
            store, self.id, lease_seconds=settings.lease_seconds, max_snoozes=settings.max_snoozes
        )
        self.progress = ProgressWriter(store, self.id, settings.progress_interval)
        self.job_logs = job_logs(settings, store, self.id)
        self.executor = Executor(
            tasks,
            settings.worker_count,
            self.completer,
            ExponentialBackoff(settings.retry_delay, settings.retry_max_delay),
            on_retry_scheduled=lambda delay: self.producer.wake_after(delay),
            default_timeout=settings.job_timeout,
            max_result_bytes=settings.max_result_bytes,
            progress=self.progress,
            observers=observers(settings, tasks, worker_id=self.id, job_logs=self.job_logs),
            job_logs=self.job_logs,
            worker_id=self.id,
            parents=lambda job_id: store.workflow_parent_results(job_id=job_id),
            durable=Durable(store, self.id, settings.max_result_bytes, Rows(tasks, settings)),
        )
        self.producer = Producer(
            store,
            self.executor,
            queues=queue_names,
            limits={q: n for q, n in limits.items() if n is not None},
            worker_id=self.id,
            lease_seconds=settings.lease_seconds,
            poll_interval=settings.poll_interval,
            notified_reliably=lambda: self.listener.healthy,
            types=None if settings.claim_any_type else types,
        )
        self.executor.on_slot_freed = self.producer.slot_freed
        self.completer.on_flushed = self.producer.outcomes_written
        self.completer.lend = self.producer.lend
        self.completer.handed = self.producer.handed
        self.listener: Listener | RelayedListener = (
            RelayedListener(self.producer.notified, on_cancel=self.executor.cancel)
            if relayed
            else Listener(
                dsn,
                store.schema,
                store.channel,
                self.producer.notified,
                cancel_channel=store.cancel_channel,
                on_cancel=self.executor.cancel,
            )
        )
        self.heartbeat = Heartbeat(
            store,
            self.id,
            self.executor.running_jobs,
            self.executor.cancel,
            lease_seconds=settings.lease_seconds,
            queues=queue_names,
            slots=settings.worker_count,
            types=types,
            any_type=settings.claim_any_type,
        )
        self.leader = Leader(
            store,
            self.id,
            lease_seconds=settings.lease_seconds,
            interval=settings.rescue_interval,
            retain_completed=settings.retain_completed,
            retain_failed=settings.retain_failed,
            retain_audit=settings.retain_audit,
            priority_aging=settings.priority_aging,
            schedules=ScheduleRunner(store, Rows(tasks, settings), schedules(settings, tasks)),
        )
        self._settings = settings
        self._store = store
        self._limits = limits
        self._tasks: list[asyncio.Task[None]] = []

    def arm_signals(self) -> None:
        """Arm every service's test signals (see jobqueue.checkpoints)."""
        for service in (
            self.producer, self.executor, self.completer, self.progress, self.heartbeat,
            self.leader,
        ):  # fmt: skip
            service.signals.arm()
        if self.job_logs is not None:
            self.job_logs.signals.arm()

    async def start(self) -> None:
        await self.heartbeat.register()
        if self._settings.limits is not None:
            await control.declare(self._store, self._settings.limits)
        self._tasks = [
            asyncio.create_task(self.completer.run(), name="completer"),
            asyncio.create_task(self.progress.run(), name="progress"),
            asyncio.create_task(self.listener.run(), name="listener"),
            asyncio.create_task(self.heartbeat.run(), name="heartbeat"),
            asyncio.create_task(self.leader.run(), name="leader"),
            asyncio.create_task(self.producer.run(), name="producer"),
        ]
        if self.job_logs is not None:
            self._tasks.insert(0, asyncio.create_task(self.job_logs.run(), name="job logs"))
        gc_tuning.freeze_long_lived(self._settings)
        log.info(
            "worker started",
            worker_id=self.id,
            queues=",".join(
                q if self._limits.get(q) is None else f"{q}={self._limits[q]}"
                for q in self.producer.queues
            ),
            slots=self._settings.worker_count,
            types="*" if self.producer.types is None else ",".join(self.producer.types),
        )

    async def stop(self, force: asyncio.Event) -> None:
        """Graceful stop; setting ``force`` cuts the grace period short."""
        self.producer.stop()
        *services, producer_task = self._tasks
        await producer_task
        if self.executor.running:
            log.info(
                f"Shutting down: waiting up to {self._settings.shutdown_timeout:g}s "
                f"for {self.executor.running} running job(s)"
            )
            await self.executor.wait_idle(self._settings.shutdown_timeout, force)
        cancelled = await self.executor.cancel_all()
        if cancelled:
            log.warning(f"Handed back {cancelled} unfinished job(s) to the queue")
        # Heartbeats go on until every outcome is written: a job must not expire meanwhile.
        await self.completer.close(FINAL_FLUSH_SECONDS)
        for task in services:
            task.cancel()
        await asyncio.gather(*services, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.heartbeat.unregister()
        self.executor.shutdown_threads()
        log.info(
            "worker stopped",
            worker_id=self.id,
            jobs_claimed=self.producer.claimed,
            claim_queries=self.producer.claims,
        )
