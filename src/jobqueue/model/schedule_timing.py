"""When a schedule ticks: a cron expression in a time zone, or an interval; and which
of its due ticks run after a time when no leader ran (``missed``).

Pure rules, shared by the HTTP API, Python, the CLI and the leader that enqueues the
ticks (jobqueue.schedules.runner). Each check raises ValueError as ``field: message``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

# A schedule's name: as a token's, it is written in paths and on command lines.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}$"
EVERY_PATTERN = re.compile(r"^\s*(\d+)\s*([smh])\s*$")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}
# An interval's bound: a year, where an integer of seconds is still far from overflowing.
EVERY_MAX_SECONDS = 366 * 86400
# A tick enqueued this late still counts as on time under `missed: skip`: a leader's
# failover (three rescue intervals) and a restart fit well within it.
ON_TIME_SECONDS = 60.0
# `missed: all` enqueues at most this many ticks that passed while no leader ran; the
# older ones are skipped (logged), so a schedule of every second down for a week
# does not flood its queue.
MISSED_ALL_MAX = 100
# How many next run times GET /schedules shows.
NEXT_RUNS = 5


class Missed(StrEnum):
    """What becomes of the ticks that passed while no leader ran."""

    SKIP = "skip"  # only a tick at most ON_TIME_SECONDS late runs; older ones are skipped
    ONCE = "once"  # the latest missed tick runs once, however late; the others are skipped
    ALL = "all"  # every missed tick runs, oldest first, at most MISSED_ALL_MAX of them


def check_name(name: str) -> str:
    if not re.match(NAME_PATTERN, name):
        raise ValueError(
            f"name: {name!r} is not a schedule name (a letter or digit, then up to 99 "
            "letters, digits or ._:@-)"
        )
    return name


def parse_every(text: str) -> int:
    """``"30s"``, ``"5m"`` or ``"2h"`` as seconds (at least 1)."""
    match = EVERY_PATTERN.match(text)
    if match is None:
        raise ValueError(f"every: {text!r} is not an interval: a whole number and s, m or h")
    seconds = int(match[1]) * UNIT_SECONDS[match[2]]
    if seconds < 1:
        raise ValueError("every: an interval is at least 1s")
    if seconds > EVERY_MAX_SECONDS:
        raise ValueError(f"every: an interval is at most {EVERY_MAX_SECONDS // 86400} days")
    return seconds


def format_every(seconds: int) -> str:
    """The interval as ``every`` is written: the largest unit that divides it."""
    for unit in ("h", "m"):
        if seconds % UNIT_SECONDS[unit] == 0:
            return f"{seconds // UNIT_SECONDS[unit]}{unit}"
    return f"{seconds}s"


def check_zone(timezone: str) -> ZoneInfo:
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"timezone: unknown time zone {timezone!r}") from None


def check_cron(expression: str) -> str:
    try:
        CronSim(expression, datetime(2026, 1, 1))
    except CronSimError as exc:
        raise ValueError(f"cron: {expression!r} is not a cron expression: {exc}") from None
    return expression


@dataclass(frozen=True)
class Timing:
    """A cron expression read in ``timezone``, or an interval of ``every_seconds``."""

    cron: str | None
    every_seconds: int | None
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every_seconds is None):
            raise ValueError("cron: give either cron or every, not both or neither")
        check_zone(self.timezone)
        if self.cron is not None:
            check_cron(self.cron)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def next_after(self, after: datetime) -> datetime:
        """The first tick strictly after ``after``; an interval's, counted from it."""
        if self.every_seconds is not None:
            return after + timedelta(seconds=self.every_seconds)
        assert self.cron is not None
        return next(CronSim(self.cron, after.astimezone(self.zone)))

    def first(self, now: datetime) -> datetime:
        """The first tick of a schedule made (or changed, or resumed) at ``now``."""
        return self.next_after(now)

    def next_runs(self, start: datetime, count: int = NEXT_RUNS) -> list[datetime]:
        """``start`` (the next tick) and the ``count - 1`` ticks after it."""
        runs = [start]
        while len(runs) < count:
            runs.append(self.next_after(runs[-1]))
        return [run.astimezone(UTC) for run in runs]

    def due(self, next_run_at: datetime, now: datetime, missed: Missed) -> Due:
        """The ticks to enqueue of a schedule whose next tick ``next_run_at`` is at or
        before ``now``, by ``missed``, and the tick after them."""
        ticks: list[datetime] = []
        tick = next_run_at
        while tick <= now and len(ticks) <= MISSED_ALL_MAX:
            ticks.append(tick)
            tick = self.next_after(tick)
        beyond = tick <= now  # more were missed than any policy runs
        if beyond:
            ticks = self._latest(next_run_at, now)
        late = (now - ticks[-1]).total_seconds()
        if missed is Missed.ALL:
            run = ticks[-MISSED_ALL_MAX:]
        elif missed is Missed.ONCE or late <= ON_TIME_SECONDS:
            run = ticks[-1:]
        else:
            run = []
        return Due(
            run=run,
            skipped=len(ticks) - len(run),
            more_skipped=beyond,
            upcoming=self.next_after(ticks[-1]),
        )

    def _latest(self, next_run_at: datetime, now: datetime) -> list[datetime]:
        """The MISSED_ALL_MAX ticks at or before ``now``, oldest first, counted back from
        ``now`` rather than walked to from a tick long past."""
        if self.every_seconds is not None:
            every = timedelta(seconds=self.every_seconds)
            last = next_run_at + every * ((now - next_run_at) // every)
            return [last - every * i for i in reversed(range(MISSED_ALL_MAX))]
        assert self.cron is not None
        # From a second on, as cron has no finer ticks, keeping only those not after now.
        back = CronSim(self.cron, now.astimezone(self.zone) + timedelta(seconds=1), reverse=True)
        latest: list[datetime] = []
        for tick in back:
            if tick <= now:
                latest.append(tick)
            if len(latest) == MISSED_ALL_MAX:
                break
        return latest[::-1]


@dataclass(frozen=True)
class Due:
    run: list[datetime]  # the ticks to enqueue now, oldest first
    skipped: int  # the missed ticks not enqueued
    more_skipped: bool  # and more than those: over MISSED_ALL_MAX ticks were missed
    upcoming: datetime  # the next tick after now: next_run_at once these are enqueued
