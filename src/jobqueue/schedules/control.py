"""Schedules made, changed, paused, triggered and deleted at run time: ``jq.schedules``,
which the HTTP API, the CLI and the dashboard call. Given who acts (``by``), each
change writes its audit row in the change's own transaction (jobqueue.audit),
refusals included.

A schedule declared in code (``source: "code"``) is the code's: it can be paused,
resumed and triggered, and any other change is refused (ScheduleConflict), since the
leader would write the code's definition back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from jobqueue import audit, observability
from jobqueue.audit import Action, Actor
from jobqueue.db.schedule_queries import ScheduleDefinition
from jobqueue.db.store import Store
from jobqueue.enqueue.rows import Rows
from jobqueue.model import fields
from jobqueue.model.audit import NOT_FOUND, conflict
from jobqueue.model.job import Job
from jobqueue.model.schedule_timing import Missed, Timing, check_name, parse_every
from jobqueue.model.schedules import (
    CODE,
    ScheduleConflict,
    ScheduleInfo,
    ScheduleNotFound,
    options_of,
    tick_payload,
)

# What PATCH may change; `name` is the schedule's identity and `source` is not a choice.
FIELDS = ("type", "cron", "every", "timezone", "payload", "queue", "priority", "missed",
          "enabled", "tags", "meta")  # fmt: skip
# A page of GET /schedules at most.
MAX_PAGE = 1000


class Schedules:
    """``jq.schedules``: see docs/schedules.md."""

    def __init__(self, store: Callable[[], Awaitable[Store]], rows: Callable[[], Rows]) -> None:
        """``rows``: the JobQueue's, which check a payload against its task's type."""
        self._store = store
        self.rows = rows

    async def create(
        self,
        name: str,
        type: str,
        *,
        cron: str | None = None,
        every: str | None = None,
        timezone: str = "UTC",
        payload: Mapping[str, Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        missed: str = "skip",
        enabled: bool = True,
        tags: Sequence[str] | None = None,
        meta: Mapping[str, Any] | None = None,
        by: Actor | None = None,
    ) -> ScheduleInfo:
        """A schedule that enqueues a job of ``type`` with ``payload`` (and ``tags`` and
        ``meta``) at every tick of ``cron`` (read in ``timezone``) or ``every`` ("30s",
        "5m", "2h"). ValueError names a field that breaks a rule; ScheduleConflict: the
        name is taken."""
        store = await self._store()
        async with store.transaction() as tx:
            now = await tx.clock_now()
            definition = self._definition(
                dict(
                    name=check_name(name), type=type, cron=cron, every=every, timezone=timezone,
                    payload=dict(payload or {}), queue=queue, priority=priority, missed=missed,
                    enabled=enabled, tags=tags, meta=meta,
                ),
                now,
            )  # fmt: skip
            created = await tx.schedule_insert(schedule=definition)
            result = audit.OK if created is not None else conflict("exists")
            await self._audit(tx, by, Action.SCHEDULE_CREATE, name, result, type=definition.type)
        if created is None:
            raise ScheduleConflict(f"a schedule named {name!r} exists; PATCH it, or pick another")
        return created

    async def get(self, name: str) -> ScheduleInfo:
        found = await (await self._store()).schedule_get(name=name)
        if found is None:
            raise ScheduleNotFound(name)
        return found

    async def list(self, *, after: str | None = None, limit: int = 100) -> list[ScheduleInfo]:
        """Schedules by name, ``limit`` at most, from after ``after``."""
        limit = max(1, min(limit, MAX_PAGE))
        return await (await self._store()).schedules_list(after=after, limit=limit)

    async def update(self, name: str, *, by: Actor | None = None, **changes: Any) -> ScheduleInfo:
        """Change any of FIELDS; one left out is kept. Giving ``cron`` replaces
        ``every`` and the other way round. A changed timing, or a schedule enabled
        again, starts from its next tick after now."""
        unknown = sorted(set(changes) - set(FIELDS))
        if unknown:
            raise TypeError(f"unknown schedule fields: {', '.join(unknown)}")
        store = await self._store()
        async with store.transaction() as tx:
            current = await tx.schedule_lock(name=name)
            refused = self._refusal(current, name, allowed=set(changes) <= {"enabled"})
            if refused is None:
                assert current is not None
                merged = self._merged(current, changes)
                definition = self._definition(merged, await tx.clock_now(), current=current)
                updated = await tx.schedule_update(schedule=definition)
            # A refusal's row commits alone: raising here would roll it back.
            result = audit.OK if refused is None else self._result_of(refused)
            await self._audit(
                tx, by, self._action_of(changes), name, result, fields=sorted(changes)
            )
        if refused is not None:
            raise refused
        return updated

    async def pause(self, name: str, *, by: Actor | None = None) -> ScheduleInfo:
        """No tick is enqueued until it is resumed; the ticks in between are skipped."""
        return await self.update(name, by=by, enabled=False)

    async def resume(self, name: str, *, by: Actor | None = None) -> ScheduleInfo:
        """Ticks again, from its next tick after now."""
        return await self.update(name, by=by, enabled=True)

    async def delete(self, name: str, *, by: Actor | None = None) -> None:
        """The schedule deleted; the jobs it enqueued stay."""
        store = await self._store()
        async with store.transaction() as tx:
            current = await tx.schedule_lock(name=name)
            refused = self._refusal(current, name, allowed=False)
            if refused is None:
                await tx.schedule_delete(name=name)
            result = audit.OK if refused is None else self._result_of(refused)
            await self._audit(tx, by, Action.SCHEDULE_DELETE, name, result)
        if refused is not None:
            raise refused

    async def trigger(self, name: str, *, by: Actor | None = None) -> Job:
        """One job of the schedule enqueued now, paused or not; its next tick is kept."""
        store = await self._store()
        async with store.transaction() as tx:
            schedule = await tx.schedule_lock(name=name)
            if schedule is not None:
                now = await tx.clock_now()
                payload = schedule.payload if schedule.payload is not None else tick_payload(now)
                row = self.rows().row(schedule.type, payload, options_of(schedule))
                job = await tx.enqueue(row=row)
                await tx.schedule_triggered(name=name, job_id=job.id)
            result = audit.OK if schedule is not None else NOT_FOUND
            await self._audit(tx, by, Action.SCHEDULE_TRIGGER, name, result)
        if schedule is None:
            raise ScheduleNotFound(name)
        observability.enqueued([row])
        return job

    def queue_of(self, schedule: ScheduleInfo) -> str:
        """The queue the schedule's jobs go to, as this process resolves it."""
        return self.rows().options(schedule.type, options_of(schedule))[0].queue

    # -- helpers ---------------------------------------------------------------------

    def _merged(self, current: ScheduleInfo, changes: Mapping[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {f: getattr(current, f) for f in FIELDS}
        merged["name"] = current.name
        merged.update(changes)
        if changes.get("cron") is not None and "every" not in changes:
            merged["every"] = None
        if changes.get("every") is not None and "cron" not in changes:
            merged["cron"] = None
        return merged

    def _definition(
        self, given: Mapping[str, Any], now: Any, current: ScheduleInfo | None = None
    ) -> ScheduleDefinition:
        """The row to write: every field checked (ValueError naming it), the payload
        against the type's task where this process has it."""
        every = None if given["every"] is None else parse_every(given["every"])
        timing = Timing(cron=given["cron"], every_seconds=every, timezone=given["timezone"])
        missed = given["missed"]
        if missed not in set(Missed):
            raise ValueError(f"missed: {missed!r} is not one of skip, once, all")
        payload = given["payload"]
        options = {k: given[k] for k in ("queue", "priority") if given[k] is not None}
        options.update((k, given[k]) for k in ("tags", "meta") if given[k])
        type_ = fields.check_type(given["type"])
        if payload is not None:  # None: a code schedule's, its tick
            self.rows().row(type_, payload, options)  # type: ignore[arg-type]
        # A new timing, or a schedule enabled again, starts afresh; else its tick stays.
        same_timing = current is not None and current.timing == timing
        kept = same_timing and current is not None and current.enabled
        return ScheduleDefinition(
            name=given["name"],
            type=type_,
            cron=timing.cron,
            every_seconds=timing.every_seconds,
            timezone=timing.timezone,
            payload=None if payload is None else dict(payload),
            queue=given["queue"],
            priority=given["priority"],
            missed=str(missed),
            enabled=bool(given["enabled"]),
            next_run_at=current.next_run_at if kept and current else timing.first(now),
            tags=fields.check_tags(given["tags"]),
            meta=dict(given["meta"]) if given["meta"] else None,
        )

    @staticmethod
    def _refusal(
        current: ScheduleInfo | None, name: str, *, allowed: bool
    ) -> ScheduleNotFound | ScheduleConflict | None:
        """Why a change of ``current`` is refused, if it is: missing, or declared in
        code and the change is not ``allowed`` for such a schedule."""
        if current is None:
            return ScheduleNotFound(name)
        if current.source == CODE and not allowed:
            return ScheduleConflict(declared_in_code(current))
        return None

    @staticmethod
    def _result_of(refused: Exception) -> str:
        return NOT_FOUND if isinstance(refused, ScheduleNotFound) else conflict(CODE)

    @staticmethod
    def _action_of(changes: Mapping[str, Any]) -> Action:
        if set(changes) == {"enabled"}:
            return Action.SCHEDULE_RESUME if changes["enabled"] else Action.SCHEDULE_PAUSE
        return Action.SCHEDULE_UPDATE

    @staticmethod
    async def _audit(
        tx: Store, by: Actor | None, action: Action, name: str, result: str, **filter: Any
    ) -> None:
        if by is not None:
            await audit.record_as(tx, by, action, target=name, filter=filter or None, result=result)


def declared_in_code(schedule: ScheduleInfo) -> str:
    return (
        f"schedule {schedule.name!r} is declared in code (@jq.task(cron=...) or "
        "JOBQUEUE_CRON): change or remove it there; it can be paused, resumed and triggered"
    )
