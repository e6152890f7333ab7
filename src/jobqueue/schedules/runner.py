"""Enqueues the ticks of schedules, on the maintenance leader.

Each tick is one job, whatever the number of processes and hosts: the due schedules
are read ``FOR UPDATE SKIP LOCKED``, and their jobs inserted and their ``next_run_at``
moved on in the same transaction, so a second leader (for a moment, two may believe
they lead) passes them over, then finds them not due. A tick is enqueued at most a
second late (POLL_SECONDS), at once when it is the earliest: the runner sleeps until
the earliest tick, or a second, whichever comes first, so a schedule changed on any
process is seen within a second. What becomes of ticks missed while no leader ran is
each schedule's ``missed`` (jobqueue.model.schedule_timing.Missed).

The schedules declared in code (``@jq.task(cron=...)``, JOBQUEUE_CRON) are written to
the table by the leader when it takes the lead (``source: "code"``), so that every
process shows them; the leader's code is the one that counts, as it always enqueued
their ticks. A job of such a schedule has the payload ``{"tick": "<the tick>"}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from jobqueue import observability
from jobqueue.cron import Schedule
from jobqueue.db.records import JobRow
from jobqueue.db.schedule_queries import CodeSchedule, ScheduleAdvance
from jobqueue.db.store import Store
from jobqueue.enqueue.rows import Rows
from jobqueue.logs import get_logger
from jobqueue.model.job import Job
from jobqueue.model.schedule_timing import Missed
from jobqueue.model.schedules import ScheduleInfo, options_of

log = get_logger("jobqueue.schedules")

# The longest the runner sleeps: a change made on another process is seen within it.
POLL_SECONDS = 1.0
# Schedules handled per transaction; more due ones wait for the next round, at once.
BATCH = 100


class ScheduleRunner:
    def __init__(
        self,
        store: Store,
        rows: Rows,
        code: Sequence[tuple[Schedule, tuple[str, int, int]]] = (),
    ) -> None:
        """``code``: the schedules declared in this process's code, each with its jobs'
        queue, priority and max_attempts (jobqueue.task.schedules)."""
        self._store = store
        self._rows = rows
        self._code = code
        self.synced = False  # the code's schedules written since this process took the lead

    async def tick(self, *, leading: bool, next_in: float | None) -> float:
        """A round, if this process leads and a tick is due; how long to sleep before
        the next. ``next_in``: seconds until the earliest tick, as the leader's probe
        found it (leader_due.sql); while none is due, that probe is all a second costs,
        not a round's transaction as well."""
        if not leading:
            return POLL_SECONDS
        if not self.synced:
            await self.sync()
            next_in = await self._store.schedules_next_in()  # the code's, just written
        if next_in is not None and next_in <= 0:
            await self.run_once()
            next_in = await self._store.schedules_next_in()
        return POLL_SECONDS if next_in is None else max(0.0, min(next_in, POLL_SECONDS))

    async def run_once(self) -> int:
        """Enqueue every due tick; return how many jobs were created."""
        if not self.synced:
            await self.sync()
        created = 0
        while True:
            jobs, full = await self._round()
            created += jobs
            if not full:
                return created

    async def sync(self) -> None:
        """Write the code's schedules; delete those the code no longer declares."""
        now = await self._store.clock_now()
        declared: dict[str, CodeSchedule] = {}
        for schedule, (queue, priority, _) in self._code:
            name = schedule.type
            if name in declared:
                log.warning(f"Schedule {name} is declared twice in code; the first one counts")
                continue
            declared[name] = CodeSchedule(
                name=name,
                type=schedule.type,
                cron=schedule.expression,
                timezone=schedule.timezone,
                queue=queue,
                priority=priority,
                first=schedule.next_tick(now),
            )
        async with self._store.transaction() as tx:
            changed = await tx.schedules_sync_code(schedules=list(declared.values()))
            removed = await tx.schedules_prune_code(keep=list(declared))
        for name in changed:
            log.info(f"Schedule {name} written as declared in code")
        for name in removed:
            log.info(f"Schedule {name} deleted: the code no longer declares it")
        self.synced = True

    async def _round(self) -> tuple[int, bool]:
        """One transaction's due schedules, their jobs inserted in one statement and
        the schedules moved on in another; the jobs' count, and whether it was full."""
        async with self._store.transaction() as tx:
            now = await tx.clock_now()
            due = await tx.schedules_due(now=now, limit=BATCH)
            made = []
            for schedule in due:
                ticks = schedule.timing.due(schedule.next_run_at, now, Missed(schedule.missed))
                made.append((schedule, ticks, self._rows_of(schedule, ticks.run)))
            rows = [row for _, _, rows in made for row in rows]
            jobs = iter(await tx.enqueue_rows(rows=rows) if rows else [])
            advances = []
            for schedule, ticks, its_rows in made:
                its_jobs = [next(jobs) for _ in its_rows]
                advances.append(
                    ScheduleAdvance(
                        name=schedule.name,
                        next_run_at=ticks.upcoming,
                        last_run_at=ticks.run[-1] if its_rows else None,
                        last_job_id=its_jobs[-1].id if its_jobs else None,
                    )
                )
                self._log(schedule, ticks.run[: len(its_rows)], its_jobs, ticks.skipped,
                          ticks.more_skipped)  # fmt: skip
            if advances:
                await tx.schedule_advance(advances=advances)
        if rows:
            observability.enqueued(rows)
        return len(rows), len(due) == BATCH

    def _rows_of(self, schedule: ScheduleInfo, ticks: list[datetime]) -> list[JobRow]:
        """A job per tick; none if the schedule can no longer make one (its type's
        payload type changed since it was made): the tick is skipped, and logged."""
        try:
            return [
                self._rows.row(
                    schedule.type,
                    self._payload(schedule, tick),
                    {**options_of(schedule), "run_at": tick},
                )
                for tick in ticks
            ]
        except (ValueError, TypeError) as exc:
            log.error(f"Schedule {schedule.name}: its tick was skipped: {exc}")
            return []

    @staticmethod
    def _payload(schedule: ScheduleInfo, tick: datetime) -> object:
        if schedule.payload is not None:
            return schedule.payload
        return {"tick": tick.astimezone(schedule.timing.zone).isoformat()}

    @staticmethod
    def _log(
        schedule: ScheduleInfo,
        ticks: list[datetime],
        jobs: list[Job],
        skipped: int,
        more_skipped: bool,
    ) -> None:
        for tick, job in zip(ticks, jobs, strict=True):
            log.info(
                f"Schedule {schedule.name}: tick {tick.isoformat()} enqueued as job {job.id}",
                job_id=job.id,
            )
        if skipped or more_skipped:
            more = "+" if more_skipped else ""
            log.info(
                f"Schedule {schedule.name}: {skipped}{more} missed ticks skipped "
                f"(missed: {schedule.missed})"
            )
