"""Priority aging: no job waits for ever behind a stream of better-priority jobs.

Every JOBQUEUE_PRIORITY_AGING seconds a due job has waited while its queue had due
jobs of a better (lower) priority, it moves up one step, until it reaches the best
priority waiting in its queue, where the oldest job runs first. A job of priority
``p`` in a queue whose best waiting priority is ``b`` therefore starts within about
``(p - b + 1) * JOBQUEUE_PRIORITY_AGING`` seconds, however busy the queue. Only such
jobs are written: a backlog of one priority is never touched. The priority a job
shows is its current, aged one.
"""

from __future__ import annotations

import time

from jobqueue.db.store import Store
from jobqueue.logs import get_logger
from jobqueue.maintenance.batches import in_batches

log = get_logger("jobqueue.aging")

BATCH = 1000
MAX_BATCHES = 50


class Aging:
    def __init__(self, store: Store, *, step_seconds: float | None) -> None:
        self._store = store
        self._step = step_seconds
        self._last_run: float | None = None

    async def run_if_due(self) -> int:
        """Age jobs at most every quarter step, so no step is late by more than that."""
        if self._step is None:
            return 0
        now = time.monotonic()
        if self._last_run is not None and now - self._last_run < self._step / 4:
            return 0
        self._last_run = now
        return await self.run_once()

    async def run_once(self) -> int:
        if self._step is None:
            return 0
        step = self._step
        aged = await in_batches(
            lambda limit: self._store.priority_age(step_seconds=step, limit=limit),
            size=BATCH,
            max_batches=MAX_BATCHES,
        )
        if aged:
            log.info(f"Priority aging moved {aged} waiting jobs up one step", aged=aged)
        return aged
