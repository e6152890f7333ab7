"""Writes outcomes back in batches: one statement per kind per flush, a few ms apart.

A flush waits to gather a batch only while outcomes come in numbers: after a flush of
fewer than GATHER_FROM outcomes, or a quiet spell of FLUSH_INTERVAL, the next outcome is
written at once, so that a job that runs alone (or a chain of them, each released by
the one before) is seen to end without waiting for others that are not coming.

Every write is fenced by (job id, attempt, worker id): if the job was taken from
this worker meanwhile, the write changes nothing and is logged as rejected.
Outcomes wait in memory until written; if the process dies first, the job is
still ``running`` in the database and is run again after its lease: never lost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from jobqueue.checkpoints import Signal, Signals
from jobqueue.db.pool import log_failure, resend_unsent
from jobqueue.db.records import ClaimedJob, Failure, Sleep, Snoozed
from jobqueue.db.store import Store
from jobqueue.logs import get_logger
from jobqueue.model.job import CANCELLED_WHILE_RUNNING, JobStatus

log = get_logger("jobqueue.completer")

# How long a flush gathers outcomes while they keep coming. Default 2 ms: a busy
# worker writes a few hundred jobs' outcomes per statement, and a job that ran alone
# is written at once. Longer makes bigger batches (fewer statements per job) and
# delays every outcome of a busy worker by as much.
FLUSH_INTERVAL = 0.002
# How many outcomes one flush must have written for the next to gather a batch.
# Default 10: below it a worker is running jobs one by one, and waiting would only
# delay each; above it the gathering saves statements (a busy worker writes hundreds
# per flush).
GATHER_FROM = 10


@dataclass(frozen=True)
class Handoff:
    """Slots lent to the completer, for the children a batch of workflow completions
    releases (complete_handoff.sql): the queues it may claim them in, how many, and
    of which types (None: any, as the producer's claims)."""

    queues: tuple[str, ...]
    slots: int
    types: tuple[str, ...] | None = None


@dataclass
class CompleterSignals(Signals):
    flushed: Signal[int] = field(default_factory=Signal)  # outcomes written by a flush


class Completer:
    def __init__(
        self,
        store: Store,
        worker_id: str,
        *,
        flush_interval: float = FLUSH_INTERVAL,
        lease_seconds: float = 30.0,
        max_snoozes: int = 100,
    ) -> None:
        self._store = store
        self._worker_id = worker_id
        self._lease_seconds = lease_seconds  # of the children it claims (Handoff)
        self._flush_interval = flush_interval
        self._flushed_at = 0.0  # when the last flush ended (monotonic)
        self._flushed = 0  # how many outcomes it wrote
        self._completed: list[ClaimedJob] = []
        self._failed: list[Failure] = []
        self._released: list[ClaimedJob] = []
        self._snoozed: list[Snoozed] = []
        self._sleeping: list[Sleep] = []  # durable sleeps (ctx.sleep)
        self._max_snoozes = max_snoozes  # JOBQUEUE_MAX_SNOOZES
        self._cancelled: list[ClaimedJob] = []
        self._results: dict[int, str] = {}  # of completed jobs that returned something
        self._workflow = False  # a job of a workflow is among the completed
        self._pending = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._closing = False
        self.signals = CompleterSignals()
        self.on_flushed: Callable[[], None] = lambda: None  # outcomes were written
        # Slots for the children that completions of workflow jobs release, and where the
        # children claimed with them go (the producer's lend and handed).
        self.lend: Callable[[], Handoff | None] = lambda: None
        self.handed: Callable[[Handoff, list[ClaimedJob]], None] = lambda lent, jobs: None

    def complete(self, job: ClaimedJob, result: str | None = None) -> None:
        """``result``: the handler's return value as JSON text, or None."""
        self._completed.append(job)
        if result is not None:
            self._results[job.id] = result
        if job.workflow_id is not None:
            self._workflow = True
        self._idle.clear()  # as _wake() does, one call less on every job's path
        self._pending.set()

    def fail(self, job: ClaimedJob, error: str, traceback: str | None, delay: float | None) -> None:
        self._failed.append(Failure(job, error, traceback, delay))
        self._wake()

    def snooze(self, job: ClaimedJob, delay: float) -> None:
        self._snoozed.append(Snoozed(job, delay))
        self._wake()

    def sleep(self, job: ClaimedJob, until: datetime) -> None:
        """The run slept (ctx.sleep): the job waits until ``until``, holding no slot."""
        self._sleeping.append(Sleep(job, until))
        self._wake()

    def release(self, job: ClaimedJob) -> None:
        self._released.append(job)
        self._wake()

    def cancel(self, job: ClaimedJob) -> None:
        """The attempt stopped because the job was cancelled: it ends cancelled."""
        self._cancelled.append(job)
        self._wake()

    def _wake(self) -> None:
        self._idle.clear()
        self._pending.set()

    async def run(self) -> None:
        """Flush until closed; a flush that cannot reach the database is retried."""
        backoff = 0.05
        while True:
            await self._pending.wait()
            if not self._closing:
                # Outcomes of the same turn of the loop join this flush; while they
                # come in numbers, so do those of the next few ms (gather a batch).
                gather = self._flushed_at + self._flush_interval - time.monotonic()
                await asyncio.sleep(gather if gather > 0 and self._flushed >= GATHER_FROM else 0)
            self._pending.clear()
            try:
                # A connection whose backend was killed while it sat in the pool: its
                # write never reached the server, and the flush is made again at once
                # on another (what was written before it is not written twice).
                self._flushed = await resend_unsent(self.flush, self._store.pool)
                self.signals.flushed.fire(self._flushed)
                self._flushed_at = time.monotonic()
                self.on_flushed()
                backoff = 0.05
            except Exception as exc:
                log_failure(
                    log, exc, "writing job outcomes failed; retrying", "job outcomes kept for retry"
                )
                self._pending.set()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            if not self._pending.is_set():
                self._idle.set()

    async def flush(self) -> int:
        """Write every outcome buffered; return how many were buffered."""
        completed, failed, released = self._completed, self._failed, self._released
        cancelled, snoozed, workflow = self._cancelled, self._snoozed, self._workflow
        sleeping = self._sleeping
        count = len(completed) + len(failed) + len(released) + len(cancelled) + len(snoozed)
        count += len(sleeping)
        self._completed, self._failed, self._released, self._cancelled = [], [], [], []
        self._snoozed, self._sleeping = [], []
        self._workflow = False
        try:
            async with self._store.connection() as store:
                worker_id = self._worker_id
                if completed:
                    # Released children are claimed here only for a worker running jobs
                    # one by one (a chain's): a busy one's claims take them by hundreds,
                    # and its batches would pay for looking.
                    lent = self.lend() if workflow and len(completed) < GATHER_FROM else None
                    await self._write(
                        "completion",
                        store.complete(
                            jobs=completed,
                            worker_id=worker_id,
                            status=JobStatus.COMPLETED,
                            results=self._results_of(completed),
                        )
                        if lent is None
                        else self._complete_handoff(store, completed, lent),
                    )
                    if self._results:  # most handlers return nothing: no loop for them
                        for job in completed:
                            self._results.pop(job.id, None)
                    completed = []
                if failed:
                    await self._write("failure", store.fail(failures=failed, worker_id=worker_id))
                    failed = []
                if released:
                    await self._write(
                        "hand-back", store.release(jobs=released, worker_id=worker_id)
                    )
                    released = []
                if snoozed:
                    await self._write(
                        "snooze",
                        store.snooze(
                            snoozes=snoozed, worker_id=worker_id, max_snoozes=self._max_snoozes
                        ),
                    )
                    snoozed = []
                if sleeping:
                    await self._write("sleep", store.sleep(sleeps=sleeping, worker_id=worker_id))
                    sleeping = []
                if cancelled:
                    await self._write(
                        "cancellation",
                        store.complete(
                            jobs=cancelled,
                            worker_id=worker_id,
                            status=JobStatus.CANCELLED,
                            error=CANCELLED_WHILE_RUNNING,
                        ),
                    )
                    cancelled = []
            return count
        except BaseException:
            # Keep what was not written for the next flush.
            self._completed[:0], self._failed[:0], self._released[:0] = completed, failed, released
            self._cancelled[:0], self._snoozed[:0] = cancelled, snoozed
            self._sleeping[:0] = sleeping
            self._workflow = self._workflow or (workflow and bool(completed))
            raise

    async def _complete_handoff(
        self, store: Store, completed: list[ClaimedJob], lent: Handoff
    ) -> list[ClaimedJob]:
        """Complete ``completed``, claiming up to ``lent`` of the children released: a
        chain's next job starts without a claim of the producer's (complete_handoff.sql).
        The slots go back to the producer whatever happens, with the children claimed."""
        handed: list[ClaimedJob] = []
        try:
            refused, handed = await store.complete_handoff(
                jobs=completed,
                worker_id=self._worker_id,
                results=self._results_of(completed),
                queues=lent.queues,
                limit=lent.slots,
                lease_seconds=self._lease_seconds,
                types=lent.types,
            )
        finally:
            self.handed(lent, handed)
        return refused

    def _results_of(self, jobs: list[ClaimedJob]) -> str | None:
        """The results of ``jobs`` as the JSON object complete.sql takes, or None."""
        if not self._results:
            return None
        parts = [f'"{j.id}":{self._results[j.id]}' for j in jobs if j.id in self._results]
        return "{" + ",".join(parts) + "}" if parts else None

    @staticmethod
    async def _write(what: str, write: Awaitable[list[ClaimedJob]]) -> None:
        """Run a fenced write, and log the jobs its fence refused."""
        for job in await write:
            log.warning(
                f"Stale {what} of job {job.id} attempt {job.attempt} rejected: "
                "the job is no longer held by this attempt",
                job_id=job.id,
                attempt=job.attempt,
            )

    async def close(self, timeout: float) -> bool:
        """Write everything still buffered; False if the database stayed out of reach."""
        self._closing = True
        self._pending.set()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            log.error(
                "job outcomes could not be written before exit; "
                "those jobs run again after their lease"
            )
            return False
