"""Returns the jobs of dead or frozen workers to the queue once their lease runs out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from jobqueue.db.records import Rescued
from jobqueue.db.store import Store
from jobqueue.observability import lifecycle

BATCH = 1000
# Workers silent for this many leases are dropped from the workers table.
FORGET_AFTER_LEASES = 10


class Rescuer:
    def __init__(self, store: Store, *, lease_seconds: float) -> None:
        self._store = store
        self._lease_seconds = lease_seconds
        self.on_rescued: Callable[[list[Rescued]], Awaitable[None]] | None = None  # metrics

    async def run_once(self) -> int:
        """Rescue every expired job, in batches; return how many."""
        rescued = 0
        while True:
            jobs = await self._store.rescue(limit=BATCH)
            for job in jobs:
                lifecycle.rescued(job)
            rescued += len(jobs)
            if jobs and self.on_rescued is not None:
                await self.on_rescued(jobs)
            if len(jobs) < BATCH:
                break
        await self._store.workers_prune(silent_seconds=self._lease_seconds * FORGET_AFTER_LEASES)
        return rescued
