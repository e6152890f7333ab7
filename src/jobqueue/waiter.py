"""``jq.wait``: until a job reaches a final state, woken by NOTIFY, not by polling.

Jobs announce their end on the done channel (complete.sql, fail.sql, cancel_jobs.sql,
rescue.sql). One LISTEN connection per event loop serves every wait on that loop; it
opens with the first wait and closes with the JobQueue's pool. A wait reads its job
again when the job's id is announced, when the listener (re)connects, and every
FALLBACK_SECONDS in case it missed the message (its listener was down, say). That
fallback costs one primary-key read per waiting job per 5 s; shorter would notice a
missed end sooner for more reads.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from jobqueue.checkpoints import Signal, Signals
from jobqueue.db.listener import Listener
from jobqueue.db.pool import unavailable_raised
from jobqueue.db.store import Store
from jobqueue.model.job import FINAL_STATES, Job, JobNotFound

FALLBACK_SECONDS = 5.0
# How long a wait lets the listener connect before it relies on the fallback alone.
LISTEN_SECONDS = 2.0


@dataclass
class WaiterSignals(Signals):
    waiting: Signal[int] = field(default_factory=Signal)  # a wait read its job, not final yet


class Waiter:
    def __init__(self, store: Store, dsn: str | None, *, fallback: float | None = None) -> None:
        """``dsn``: where to LISTEN, None for nowhere (poll-only); ``fallback``: seconds
        between reads of a waiting job (default FALLBACK_SECONDS)."""
        self._store = store
        self._fallback = FALLBACK_SECONDS if fallback is None else fallback
        self._wakers: dict[int, set[asyncio.Event]] = {}
        self._listener = Listener(dsn, store.schema, store.done_channel, self._announced)
        self._task: asyncio.Task[None] | None = None
        self.signals = WaiterSignals()

    async def wait(self, job_id: int, timeout: float | None) -> Job:
        """The job once final. Raises JobNotFound, TimeoutError after ``timeout``
        seconds (None: no limit), or DatabaseUnavailable when its read cannot reach the
        database."""
        if self._task is None:
            self._task = asyncio.create_task(self._listener.run(), name="jobqueue-waiter")
        woken = asyncio.Event()
        self._wakers.setdefault(job_id, set()).add(woken)
        try:
            async with asyncio.timeout(timeout):
                # Listening before the first read: an end announced between the two is
                # not missed.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._listener.listening.wait(), LISTEN_SECONDS)
                while True:
                    with unavailable_raised():  # not the wait's own TimeoutError
                        job = await self._store.get_job(job_id=job_id)
                    if job is None:
                        raise JobNotFound(job_id)
                    if job.status in FINAL_STATES:
                        return job
                    self.signals.waiting.fire(job_id)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(woken.wait(), self._fallback)
                    woken.clear()
        finally:
            wakers = self._wakers[job_id]
            wakers.discard(woken)
            if not wakers:
                del self._wakers[job_id]

    def _announced(self, payload: str | None) -> None:
        """Wake the waits of the jobs named (``"12,13"``); None (a reconnect): all."""
        if not self._wakers:
            return
        if payload is None:
            ids = list(self._wakers)
        else:
            ids = [int(part) for part in payload.split(",") if part.isdigit()]
        for job_id in ids:
            for woken in self._wakers.get(job_id, ()):
                woken.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
