"""Enqueues the ticks of periodic (cron) jobs, on the maintenance leader.

Each tick becomes one job, whatever the number of processes and hosts: its unique key
(``cron:<type>:<tick>``) is held until after the next tick, so a second leader, or
this one again, finds the key taken. A tick is enqueued within a maintenance interval
of its time. Ticks missed while no leader ran are not replayed: when a leader starts,
the latest tick runs once if it is less than CATCH_UP_SECONDS old, and older ones are
skipped. The job's payload is ``{"tick": "<the tick, ISO 8601>"}``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from jobqueue import observability
from jobqueue.cron import Schedule
from jobqueue.db.records import JobRow
from jobqueue.db.store import Store
from jobqueue.logs import get_logger

log = get_logger("jobqueue.scheduler")

# A tick missed by less than this (a leader's failover, a restart) still runs once.
CATCH_UP_SECONDS = 3600.0
# The key of a tick stays taken this long after the next tick is due.
KEY_MARGIN_SECONDS = 3600.0


class Scheduler:
    def __init__(
        self,
        store: Store,
        schedules: Sequence[tuple[Schedule, tuple[str, int, int]]],
    ) -> None:
        """``schedules``: each with its jobs' queue, priority and max_attempts."""
        self._store = store
        self._schedules = list(schedules)
        self._done: dict[Schedule, datetime] = {}  # the last tick handled, per schedule

    async def run_once(self, now: datetime | None = None) -> int:
        """Enqueue every tick due and not handled yet; return how many jobs were created.
        ``now``: the time to schedule for; default, the store's clock, else this host's."""
        now = now or self._store.clock.now() or datetime.now(UTC)
        created = 0
        for schedule, (queue, priority, max_attempts) in self._schedules:
            tick = schedule.last_tick(now)
            if self._done.get(schedule) == tick:
                continue
            self._done[schedule] = tick
            if now - tick > timedelta(seconds=CATCH_UP_SECONDS):
                continue  # missed while no leader ran: skipped, not replayed
            hold = (schedule.next_tick(tick) - tick).total_seconds() + KEY_MARGIN_SECONDS
            row = JobRow(
                type=schedule.type,
                queue=queue,
                priority=priority,
                max_attempts=max_attempts,
                run_at=tick,
                delay_seconds=None,
                payload=json.dumps({"tick": tick.isoformat()}),
            )
            job = await self._store.enqueue_unique(
                row=row, unique_key=schedule.key(tick), hold_seconds=hold
            )
            if job is not None:
                created += 1
                observability.enqueued([row])
                log.info(
                    f"Cron tick {tick.isoformat()} of {schedule.type} enqueued as job {job.id}",
                    job_id=job.id,
                )
        return created
