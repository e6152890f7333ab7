"""Wakes the jobs asleep in a durable sleep (ctx.sleep, docs/durable.md) once their time
has come: pending again, and their queues' workers told by NOTIFY, so that a job
resumes within a second of its time.

The leader runs it when its per-second probe (leader_due.sql, which it makes for the
schedules' ticks too) finds a waiting job due, on the loop that ticks the schedules,
apart from its other maintenance (every JOBQUEUE_RESCUE_INTERVAL): a job asleep costs
no statement until its time, and wakes within a second of it.
"""

from __future__ import annotations

from jobqueue.db.store import Store
from jobqueue.maintenance.batches import in_batches

BATCH = 1000
# A backlog (no leader for a while) is woken over a few rounds, not in one go.
MAX_BATCHES = 20


class Sleepers:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def run_once(self) -> int:
        """Wake every waiting job whose time has come (up to MAX_BATCHES batches)."""
        return await in_batches(
            lambda limit: self._store.wake(limit=limit), size=BATCH, max_batches=MAX_BATCHES
        )
