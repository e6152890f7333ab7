"""Leader election by a renewed lease row, and the leader's periodic work.

Every worker process runs a Leader, which competes for the lead. Each interval it
claims or renews the leader row for three intervals; the process that holds it runs
the rescuer, the schedules and the waking of durable sleeps (on a loop of their own,
to the second), priority aging, retention, the folding of the queue counters'
changes, the expiry of idempotency keys and the dashboard's per-minute series; and,
once per process, it warns if autovacuum cannot reach the tables (vacuum.py). A
leader that dies or freezes stops renewing, and another process takes over within
three intervals.
Two processes that both believe they lead for a moment do no harm: rescuing,
retention, folding and waking are idempotent (they touch only expired leases, old
finished jobs, counter changes and due waiting jobs, under SKIP LOCKED).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from jobqueue.checkpoints import Signal, Signals
from jobqueue.db.pool import log_failure
from jobqueue.db.store import Store
from jobqueue.logs import get_logger
from jobqueue.maintenance.aging import Aging
from jobqueue.maintenance.compaction import Compaction
from jobqueue.maintenance.expired_keys import IdempotencyExpiry
from jobqueue.maintenance.rescuer import Rescuer
from jobqueue.maintenance.retention import Retention
from jobqueue.maintenance.series import Series
from jobqueue.maintenance.sleepers import Sleepers
from jobqueue.maintenance.vacuum import VacuumCheck
from jobqueue.schedules import runner
from jobqueue.schedules.runner import ScheduleRunner

log = get_logger("jobqueue.maintenance")

ROLE = "maintenance"
TERM_INTERVALS = 3


@dataclass
class LeaderSignals(Signals):
    ran: Signal[bool] = field(default_factory=Signal)  # a round ended: whether it led


class Leader:
    def __init__(
        self,
        store: Store,
        worker_id: str,
        *,
        lease_seconds: float,
        interval: float,
        retain_completed: float | None = None,
        retain_failed: float | None = None,
        retain_audit: float | None = None,
        priority_aging: float | None = None,
        schedules: ScheduleRunner | None = None,
    ) -> None:
        """``schedules``: the runner of this process's schedules (jobqueue.schedules);
        None runs none, as for a test of the other services."""
        self._store = store
        self._id = worker_id
        self._interval = interval
        self.rescuer = Rescuer(store, lease_seconds=lease_seconds)
        self.aging = Aging(store, step_seconds=priority_aging)
        self.schedules = schedules
        self.retention = Retention(
            store,
            retain_completed=retain_completed,
            retain_failed=retain_failed,
            retain_audit=retain_audit,
        )
        self.compaction = Compaction(store)
        self.idempotency = IdempotencyExpiry(store)
        self.series = Series(store)
        self.sleepers = Sleepers(store)
        self.vacuum = VacuumCheck(store)
        self.is_leader = False
        self.signals = LeaderSignals()

    async def run(self) -> None:
        ticking: asyncio.Task[None] | None = None
        try:
            while True:
                await self.run_once()
                if ticking is None:  # after the first round: it starts knowing if it leads
                    ticking = asyncio.create_task(self._tick(), name="leader-due")
                again_in = self.compaction.again_in if self.is_leader else None
                await asyncio.sleep(min(self._interval, again_in or self._interval))
        finally:
            if ticking is not None:
                ticking.cancel()
            if self.is_leader:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.resign())

    async def run_once(self) -> None:
        try:
            leading = await self._store.leader_elect(
                role=ROLE, leader_id=self._id, term_seconds=self._interval * TERM_INTERVALS
            )
            if leading != self.is_leader:
                self.is_leader = leading
                if self.schedules is not None:
                    self.schedules.synced = False  # written again by the new leader
                log.info(
                    "This process is now the maintenance leader"
                    if self.is_leader
                    else "Another process leads maintenance now"
                )
            if self.is_leader:
                await self.vacuum.run_once()
                await self.rescuer.run_once()
                await self.aging.run_if_due()
                await self.retention.run_if_due()
                await self.idempotency.run_once()
                await self.compaction.run_once()
                await self.series.run_once()
        except Exception as exc:
            log_failure(log, exc, "maintenance failed", "maintenance skipped")
        self.signals.ran.fire(self.is_leader)

    async def _tick(self) -> None:
        """What is due to the second, on a loop of its own where the rest of maintenance
        runs every interval: the schedules' ticks and the ends of durable sleeps. While
        neither is due, that is one indexed probe a second (leader_due.sql), and the
        loop sleeps until the earlier of the two, or a second."""
        while True:
            wait = runner.POLL_SECONDS
            if self.is_leader:
                try:
                    schedule_in, wake_in = await self._store.leader_due()
                    if wake_in is not None and wake_in <= 0:
                        await self.sleepers.run_once()
                        wake_in = None  # the next probe finds the next one
                    if self.schedules is not None:
                        wait = await self.schedules.tick(leading=True, next_in=schedule_in)
                    if wake_in is not None:
                        wait = min(wait, wake_in)
                except Exception as exc:
                    log_failure(
                        log, exc, "enqueueing schedules' ticks or waking waiting jobs failed",
                        "ticks and wake-ups delayed",
                    )  # fmt: skip
            await asyncio.sleep(max(0.0, wait))

    async def resign(self) -> None:
        """Hand the lead over at once on a clean stop, instead of after it expires."""
        await self._store.leader_resign(role=ROLE, leader_id=self._id)
        self.is_leader = False
