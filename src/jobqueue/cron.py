"""Periodic jobs: a cron expression, in a time zone, for a job type.

Declared on a task (``@jq.task("report", cron="0 9 * * 1-5", cron_timezone="Europe/Paris")``)
or in JOBQUEUE_CRON. The maintenance leader writes it to the schedules table and enqueues each tick
(jobqueue.schedules.runner).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError


@dataclass(frozen=True)
class Schedule:
    type: str
    expression: str
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        try:
            zone = ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"cron_timezone: unknown time zone {self.timezone!r}") from exc
        try:
            CronSim(self.expression, datetime.now(zone))
        except CronSimError as exc:
            raise ValueError(f"cron: {self.expression!r} is not a cron expression: {exc}") from exc

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def next_tick(self, after: datetime) -> datetime:
        return next(CronSim(self.expression, after.astimezone(self.zone)))


def parse_entries(entries: tuple[str, ...]) -> list[Schedule]:
    """JOBQUEUE_CRON entries, ``type=expression`` or ``type=expression@Zone/Name``."""
    schedules = []
    for entry in entries:
        type_, sep, rest = entry.partition("=")
        expression, _, zone = rest.partition("@")
        if not sep or not type_.strip() or not expression.strip():
            raise ValueError(f"{entry!r} is not type=cron expression[@time zone]")
        schedules.append(Schedule(type_.strip(), expression.strip(), zone.strip() or "UTC"))
    return schedules
