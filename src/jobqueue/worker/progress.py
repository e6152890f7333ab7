"""Writes the progress handlers report (``ctx.progress``), rate-limited.

Reports only update memory; one statement writes every job's latest report, at once
after a quiet spell and then at most once per JOBQUEUE_PROGRESS_INTERVAL. A handler
may report in a tight loop: it costs a dict assignment, not a query. Writes are
fenced by attempt and worker, so a stale attempt's report never lands. A report made
just before an attempt completes or fails is written before its outcome.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from jobqueue.checkpoints import Signal, Signals
from jobqueue.db.pool import log_failure
from jobqueue.db.records import ClaimedJob, ProgressReport
from jobqueue.db.store import Store
from jobqueue.logs import get_logger
from jobqueue.sync_bridge import set_event

log = get_logger("jobqueue.progress")

MAX_MESSAGE_CHARS = 1000


@dataclass
class ProgressSignals(Signals):
    written: Signal[int] = field(default_factory=Signal)  # a write ended: reports written


class ProgressWriter:
    def __init__(self, store: Store, worker_id: str, interval: float) -> None:
        self._store = store
        self._worker_id = worker_id
        self._interval = interval
        # Reports come from handler threads too: the lock guards the latest ones.
        self._lock = threading.Lock()
        self._latest: dict[int, ProgressReport] = {}
        # One write at a time: two writes on two connections could commit out of
        # order, and a job's older report land over its newer one.
        self._writing = asyncio.Lock()
        self._in_flight: frozenset[int] = frozenset()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reported = asyncio.Event()
        self.signals = ProgressSignals()

    def report(self, job: ClaimedJob, fraction: float | None, message: str | None) -> None:
        """Keep ``job``'s latest progress for the next write; from any thread."""
        if fraction is not None and not (
            isinstance(fraction, int | float) and 0.0 <= fraction <= 1.0
        ):  # NaN too: it compares false with both bounds
            raise ValueError(
                f"progress: fraction must be a finite number from 0 to 1, got {fraction!r}"
            )
        if message is not None:
            message = str(message)[:MAX_MESSAGE_CHARS]
        with self._lock:
            self._latest[job.id] = ProgressReport(
                job, None if fraction is None else float(fraction), message
            )
        if self._loop is not None:
            set_event(self._reported, self._loop)

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        while True:
            await self._reported.wait()
            self._reported.clear()
            try:
                await self.flush()
            except Exception as exc:
                log_failure(log, exc, "writing progress failed", "progress not written")
            await asyncio.sleep(self._interval)

    def settle(self, job_id: int) -> Coroutine[Any, Any, None] | None:
        """What to await to write ``job_id``'s unwritten report before its outcome is
        written (an ended attempt shows its last progress, not the one before); None
        when it has none. (Not a coroutine: most attempts report nothing, and need not
        pay for one.) A report another write holds counts too: that write is awaited,
        since an outcome committed first would fence it out. Never raises: progress
        must not fail a job."""
        pending = job_id in self._latest or job_id in self._in_flight
        return self._settle() if pending else None

    async def _settle(self) -> None:
        try:
            await self.flush()
        except Exception as exc:
            log_failure(log, exc, "writing progress failed", "progress not written")

    async def flush(self) -> None:
        async with self._writing:
            with self._lock:
                latest, self._latest = self._latest, {}
            if not latest:
                return
            self._in_flight = frozenset(latest)
            try:
                await self._store.progress(reports=list(latest.values()), worker_id=self._worker_id)
            finally:
                self._in_flight = frozenset()
        self.signals.written.fire(len(latest))
