"""Keeps this worker's claims alive: one statement renews the lease of every job it
runs, and its row in the workers table says it is alive.

A worker that dies, or freezes, stops renewing; its jobs' leases run out and the
rescuer hands them to another worker.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

from jobqueue.checkpoints import Signal, Signals
from jobqueue.db.pool import log_failure, resend_unsent
from jobqueue.db.records import ClaimedJob
from jobqueue.db.store import Store
from jobqueue.logs import get_logger

log = get_logger("jobqueue.heartbeat")


@dataclass
class HeartbeatSignals(Signals):
    beat: Signal[int] = field(default_factory=Signal)  # a beat ended: the leases renewed


class Heartbeat:
    def __init__(
        self,
        store: Store,
        worker_id: str,
        running_jobs: Callable[[], list[ClaimedJob]],
        on_cancel: Callable[[int], None],
        *,
        lease_seconds: float,
        queues: tuple[str, ...],
        slots: int,
        types: tuple[str, ...],
        any_type: bool,
    ) -> None:
        """``types``: the job types this worker has handlers for; ``any_type``: whether
        it claims every type all the same. Both are announced when it registers."""
        self._store = store
        self._worker_id = worker_id
        self._running_jobs = running_jobs
        self._on_cancel = on_cancel  # a job asked to stop whose NOTIFY we may have missed
        self._lease_seconds = lease_seconds
        self._queues = queues
        self._slots = slots
        self._types = types
        self._any_type = any_type
        # A third of the lease: two beats can be lost before a live worker's jobs expire.
        self.interval = lease_seconds / 3
        self.signals = HeartbeatSignals()

    async def register(self, store: Store | None = None) -> None:
        await (store or self._store).worker_register(
            worker_id=self._worker_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=self._queues,
            slots=self._slots,
            types=self._types,
            any_type=self._any_type,
        )

    async def unregister(self) -> None:
        await self._store.worker_unregister(worker_id=self._worker_id)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                # A connection whose backend was killed while it sat in the pool fails
                # before anything is sent: the beat is made again at once on another.
                self.signals.beat.fire(await resend_unsent(self.beat, self._store.pool))
            except Exception as exc:
                log_failure(log, exc, "heartbeat failed", "heartbeat missed")

    async def beat(self) -> int:
        """Renew this worker's row and its jobs' leases; return how many were renewed.

        Jobs finish while the beat waits for the database: a job whose completion was
        written meanwhile is refused by the fence too. So the jobs are listed as late as
        possible, and a refused lease counts as taken only if this worker still runs
        that attempt afterwards; otherwise it had simply ended."""
        async with self._store.connection() as store:
            if not await store.worker_heartbeat(worker_id=self._worker_id):
                # Forgotten while silent (an outage, a stall): announced again, or its
                # types would count as handled by no one.
                await self.register(store)
            jobs = self._running_jobs()
            if not jobs:
                return 0
            renewal = await store.heartbeat(
                jobs=jobs, worker_id=self._worker_id, lease_seconds=self._lease_seconds
            )
        for job in self._still_running(renewal.lost):
            log.warning(
                f"Lease of job {job.id} attempt {job.attempt} not renewed: "
                "the job was taken from this worker",
                job_id=job.id,
            )
        for job_id in renewal.cancel_requested:
            self._on_cancel(job_id)
        return len(jobs) - len(renewal.lost)

    def _still_running(self, jobs: list[ClaimedJob]) -> list[ClaimedJob]:
        if not jobs:
            return jobs
        running = {(job.id, job.attempt) for job in self._running_jobs()}
        return [job for job in jobs if (job.id, job.attempt) in running]
