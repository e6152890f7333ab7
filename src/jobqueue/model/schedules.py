"""A schedule as users read it (GET /schedules, ``jq.schedules``, ``jobqueue schedules``)."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from typing import Any, ClassVar

from jobqueue.model.options import BatchOptions
from jobqueue.model.schedule_timing import Missed, Timing, format_every, parse_every

CODE = "code"  # declared by @jq.task(cron=...) or JOBQUEUE_CRON: read-only but for pausing
API = "api"  # made over HTTP, Python or the CLI


@dataclasses.dataclass(frozen=True, slots=True)
class LastJob:
    id: int
    status: str | None  # None: the job is gone (retention)


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """One schedule: its definition, its state and its next run times."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {
        "json_schema_extra": {
            "examples": [
                {
                    "name": "nightly-report",
                    "type": "report",
                    "cron": "0 3 * * *",
                    "every": None,
                    "timezone": "Europe/Berlin",
                    "payload": {"format": "pdf"},
                    "queue": None,
                    "priority": None,
                    "tags": ["reports"],
                    "meta": {"team": "finance"},
                    "missed": "skip",
                    "enabled": True,
                    "source": "api",
                    "next_run_at": "2026-12-06T02:00:00Z",
                    "next_runs": ["2026-12-06T02:00:00Z", "2026-12-07T02:00:00Z"],
                    "last_run_at": "2026-12-05T02:00:00Z",
                    "last_job": {"id": 41, "status": "completed"},
                    "created_at": "2026-12-01T09:30:00Z",
                    "updated_at": "2026-12-01T09:30:00Z",
                }
            ]
        }
    }

    name: str
    type: str
    cron: str | None
    every: str | None  # "30s", "5m", "2h"
    timezone: str
    # The jobs' payload; None: each job's is {"tick": "<the tick>"} (declared in code).
    payload: dict[str, Any] | None
    queue: str | None  # None: the task's queue where the tick is enqueued, else default
    priority: int | None
    missed: str
    enabled: bool
    source: str
    next_run_at: datetime
    next_runs: list[datetime]  # the next five ticks; none while paused
    last_run_at: datetime | None
    last_job: LastJob | None
    created_at: datetime
    updated_at: datetime
    tags: list[str] = dataclasses.field(default_factory=list)
    """Its jobs' tags (docs/search.md)."""
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Its jobs' metadata (docs/search.md)."""

    @property
    def timing(self) -> Timing:
        every = None if self.every is None else parse_every(self.every)
        return timing_of(self.cron, every, self.timezone)

    @classmethod
    def from_record(cls, r: Any, *, upcoming: bool = True) -> ScheduleInfo:
        """``upcoming``: compute ``next_runs`` (the leader, which has no use for
        them, saves four cron steps per due schedule)."""
        timing = timing_of(r["cron"], r["every_seconds"], r["timezone"])
        payload = r["payload"]
        last_job = r["last_job_id"]
        return cls(
            name=r["name"],
            type=r["type"],
            cron=r["cron"],
            every=None if r["every_seconds"] is None else format_every(r["every_seconds"]),
            timezone=r["timezone"],
            payload=None if payload is None else json.loads(payload),
            queue=r["queue"],
            priority=r["priority"],
            missed=Missed(r["missed"]).value,
            enabled=r["enabled"],
            source=r["source"],
            next_run_at=r["next_run_at"],
            next_runs=timing.next_runs(r["next_run_at"]) if r["enabled"] and upcoming else [],
            last_run_at=r["last_run_at"],
            last_job=None if last_job is None else LastJob(last_job, r["last_job_status"]),
            created_at=r["created_at"],
            updated_at=r["updated_at"],
            tags=r["tags"] or [],
            meta={} if r["meta"] is None else json.loads(r["meta"]),
        )


def timing_of(cron: str | None, every_seconds: int | None, timezone: str) -> Timing:
    return Timing(cron=cron, every_seconds=every_seconds, timezone=timezone)


class ScheduleNotFound(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no schedule named {name!r}")
        self.name = name


class ScheduleConflict(Exception):
    """A change refused for what the schedule is: its name taken, or declared in code."""


def options_of(schedule: ScheduleInfo) -> BatchOptions:
    options: BatchOptions = {}
    if schedule.queue is not None:
        options["queue"] = schedule.queue
    if schedule.priority is not None:
        options["priority"] = schedule.priority
    if schedule.tags:
        options["tags"] = schedule.tags
    if schedule.meta:
        options["meta"] = schedule.meta
    return options


def tick_payload(tick: Any) -> dict[str, str]:
    """A code schedule's job payload: its tick, as jobs of periodic tasks always had."""
    return {"tick": tick.isoformat()}
