"""The store's queries of schedules (jobqueue.schedules). Part of the Store
(db/store.py), which inherits it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobqueue.db.query_base import QueryBase
from jobqueue.model.schedules import ScheduleInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleDefinition:
    """A schedule's row as schedule_insert.sql and schedule_update.sql write it."""

    name: str
    type: str
    cron: str | None
    every_seconds: int | None
    timezone: str
    payload: dict[str, Any] | None  # None: each job's is {"tick": ...}
    queue: str | None
    priority: int | None
    missed: str
    enabled: bool
    next_run_at: datetime
    tags: list[str] | None = None  # its jobs' (migration 0030)
    meta: dict[str, Any] | None = None

    def values(self) -> tuple[object, ...]:
        payload = None if self.payload is None else json.dumps(self.payload)
        meta = None if self.meta is None else json.dumps(self.meta)
        return (
            self.name, self.type, self.cron, self.every_seconds, self.timezone, payload,
            self.queue, self.priority, self.missed, self.enabled, self.next_run_at,
            self.tags, meta,
        )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleAdvance:
    """A due schedule's ticks enqueued (schedule_advance.sql): its next tick, and the
    last tick and job it enqueued, None if it enqueued none."""

    name: str
    next_run_at: datetime
    last_run_at: datetime | None
    last_job_id: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeSchedule:
    """A schedule declared in code, as the leader writes it (schedules_sync_code.sql)."""

    name: str
    type: str
    cron: str
    timezone: str
    queue: str
    priority: int
    first: datetime  # its first tick, if it is new


class ScheduleQueries(QueryBase):
    # -- schedules (jobqueue.schedules) -------------------------------------------------

    async def schedule_insert(self, *, schedule: ScheduleDefinition) -> ScheduleInfo | None:
        """The schedule stored, or None if its name is taken."""
        record = await self.db.fetchrow(self._q.schedule_insert, *schedule.values())
        return None if record is None else ScheduleInfo.from_record(record)

    async def schedule_get(self, *, name: str) -> ScheduleInfo | None:
        record = await self.db.fetchrow(self._q.schedule_get, name)
        return None if record is None else ScheduleInfo.from_record(record)

    async def schedule_lock(self, *, name: str) -> ScheduleInfo | None:
        """The schedule, its row locked until the transaction ends."""
        record = await self.db.fetchrow(self._q.schedule_lock, name)
        return None if record is None else ScheduleInfo.from_record(record)

    async def schedules_list(self, *, after: str | None, limit: int) -> list[ScheduleInfo]:
        records = await self.db.fetch(self._q.schedules_list, after, limit)
        return [ScheduleInfo.from_record(r) for r in records]

    async def schedule_update(self, *, schedule: ScheduleDefinition) -> ScheduleInfo:
        record = await self.db.fetchrow(self._q.schedule_update, *schedule.values())
        return ScheduleInfo.from_record(record)

    async def schedule_delete(self, *, name: str) -> bool:
        return await self.db.fetchval(self._q.schedule_delete, name) is not None

    async def schedule_triggered(self, *, name: str, job_id: int) -> None:
        await self.db.execute(self._q.schedule_triggered, name, job_id)

    async def schedules_due(self, *, now: datetime, limit: int) -> list[ScheduleInfo]:
        """Enabled schedules due at ``now``, locked (SKIP LOCKED) for this transaction."""
        records = await self.db.fetch(self._q.schedules_due, now, limit)
        return [ScheduleInfo.from_record(r, upcoming=False) for r in records]

    async def schedules_next_in(self) -> float | None:
        """Seconds until the earliest enabled tick (0 or less: due); None with none."""
        seconds: float | None = await self.db.fetchval(self._q.schedules_next_in, self.clock.now())
        return seconds

    async def schedule_advance(self, *, advances: Sequence[ScheduleAdvance]) -> None:
        """A round of due schedules moved on, in one statement."""
        a = advances
        await self.db.execute(
            self._q.schedule_advance,
            [x.name for x in a], [x.next_run_at for x in a], [x.last_run_at for x in a],
            [x.last_job_id for x in a],
        )  # fmt: skip

    async def schedules_sync_code(self, *, schedules: Sequence[CodeSchedule]) -> list[str]:
        """The code's schedules written; the names inserted or changed."""
        s = schedules
        records = await self.db.fetch(
            self._q.schedules_sync_code,
            [c.name for c in s], [c.type for c in s], [c.cron for c in s],
            [c.timezone for c in s], [c.queue for c in s], [c.priority for c in s],
            [c.first for c in s],
        )  # fmt: skip
        return [r["name"] for r in records]

    async def schedules_prune_code(self, *, keep: Sequence[str]) -> list[str]:
        """Code schedules not in ``keep`` deleted; their names."""
        return [r["name"] for r in await self.db.fetch(self._q.schedules_prune_code, list(keep))]
