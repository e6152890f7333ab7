"""``/schedules``: periodic jobs as data (docs/schedules.md), over ``jq.schedules``.

Reading takes ``jobs:read``; every change takes ``schedules:control``. A token
restricted to queues or types sees and changes only the schedules whose jobs it could
enqueue (the others are a 404, as jobs out of reach are), and may not make or move
one out of its reach (403).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from jobqueue.api.errors import field_error
from jobqueue.api.new_jobs import check, known, problems_status
from jobqueue.api.responses import BODY, INVALID, UNAVAILABLE, Responses, declare
from jobqueue.api.schemas import Problem
from jobqueue.api.state import jobqueue
from jobqueue.app import JobQueue
from jobqueue.audit import Actor
from jobqueue.auth import access
from jobqueue.auth.authenticator import require
from jobqueue.enqueue.new_job import (
    Int32,
    JobType,
    Meta,
    NewJob,
    Payload,
    QueueName,
    StorableText,
    Tags,
)
from jobqueue.model.job import Job
from jobqueue.model.schedule_timing import (
    NAME_PATTERN,
    Missed,
    check_cron,
    check_zone,
    parse_every,
)
from jobqueue.model.schedules import ScheduleInfo, ScheduleNotFound
from jobqueue.model.tokens import Principal, Scope
from jobqueue.schedules.control import FIELDS
from jobqueue.task import PayloadError

router = APIRouter()

NOT_FOUND: Responses = {404: {"description": "No such schedule", "model": Problem}}
FORBIDDEN: Responses = {
    403: {"description": "A queue or type out of the token's reach", "model": Problem}
}


def _unprefixed(check: Any) -> Any:
    """A check of jobqueue.model.schedule_timing as a pydantic validator: its message
    without the ``field:`` prefix, which pydantic's location gives already."""

    def validate(value: str) -> str:
        try:
            check(value)
        except ValueError as exc:
            raise ValueError(str(exc).partition(": ")[2]) from None
        return value

    return AfterValidator(validate)


Cron = Annotated[str, _unprefixed(check_cron)]
Every = Annotated[str, _unprefixed(parse_every)]
TimeZone = Annotated[str, _unprefixed(check_zone)]
Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
NamePath = Annotated[
    str, Path(pattern=NAME_PATTERN, description="The schedule's name.", examples=["nightly"])
]


class NewSchedule(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "nightly-report",
                    "type": "report",
                    "cron": "0 3 * * *",
                    "timezone": "Europe/Berlin",
                    "payload": {"format": "pdf"},
                },
                {"name": "poll-partner", "type": "poll", "every": "30s"},
            ]
        },
    )

    name: Name = Field(description="Unique; letters, digits and ._:@-, up to 100.")
    type: JobType = Field(description="The job type each tick enqueues.")
    cron: Cron | None = Field(default=None, description="A cron expression; or give `every`.")
    every: Every | None = Field(
        default=None, description='An interval: "30s", "5m", "2h" (at least 1s); or `cron`.'
    )
    timezone: TimeZone = Field(default="UTC", description="The zone `cron` is read in.")
    payload: Payload = Field(default_factory=dict, description="Each job's payload.")
    queue: QueueName | None = Field(
        default=None, description="The jobs' queue; default: the task's, else `default`."
    )
    priority: Int32 | None = Field(
        default=None, description="The jobs' priority; default: the task's, else 0."
    )
    missed: Missed = Field(
        default=Missed.SKIP,
        description="Ticks missed while no process ran: `skip` (only one at most a "
        "minute late runs), `once` (the latest runs once), `all` (each runs, at most 100).",
    )
    enabled: bool = Field(default=True, description="false: made paused.")
    tags: Tags | None = Field(default=None, description="Each job's tags.")
    meta: Meta | None = Field(default=None, description="Each job's metadata.")


class SchedulePatch(BaseModel):
    """The fields to change; one left out is kept. `cron` replaces `every` and the other
    way round; null `queue` or `priority` goes back to the default, and null `tags` or
    `meta` removes them."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"cron": "0 4 * * *"}, {"payload": {"format": "csv"}}]},
    )

    type: JobType | None = None
    cron: Cron | None = None
    every: Every | None = None
    timezone: TimeZone | None = None
    payload: Payload | None = None
    queue: QueueName | None = None
    priority: Int32 | None = None
    missed: Missed | None = None
    enabled: bool | None = None
    tags: Tags | None = None
    meta: Meta | None = None


class ScheduleList(BaseModel):
    schedules: list[ScheduleInfo]
    next_after: str | None = None
    """Pass as `after` for the next page; null on the last."""


@router.post(
    "/schedules",
    status_code=201,
    response_model=ScheduleInfo,
    summary="Create a schedule",
    responses=declare(
        BODY,
        INVALID,
        UNAVAILABLE,
        FORBIDDEN,
        {409: {"description": "A schedule of this name exists", "model": Problem}},
    ),
)
async def create_schedule(
    request: Request,
    who: Annotated[Principal, require(Scope.SCHEDULES)],
    new: NewSchedule,
) -> ScheduleInfo:
    """Enqueues a job of `type` at every tick of `cron` (in `timezone`) or of `every`,
    exactly once across every process, from the next tick after now."""
    _one_timing(new.cron, new.every)
    jq = jobqueue(request)
    _may_use(who, jq, new.type, new.queue)
    await _runnable(request, new.type, new.queue, new.payload)
    with _field_errors():
        return await jq.schedules.create(
            new.name, new.type, cron=new.cron, every=new.every, timezone=new.timezone,
            payload=new.payload, queue=new.queue, priority=new.priority,
            missed=new.missed.value, enabled=new.enabled, tags=new.tags, meta=new.meta,
            by=Actor.of(who),
        )  # fmt: skip


@router.get(
    "/schedules",
    response_model=ScheduleList,
    summary="List schedules",
    responses=declare(INVALID, UNAVAILABLE),
)
async def list_schedules(
    request: Request,
    who: Annotated[Principal, require(Scope.READ)],
    after: Annotated[
        StorableText | None, Query(description="The last name of the page before.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> ScheduleList:
    """Every schedule, by name, with its next five run times and its last job, those
    declared in code (`"source": "code"`) included."""
    jq = jobqueue(request)
    page = await jq.schedules.list(after=after, limit=limit)
    next_after = page[-1].name if len(page) == limit else None
    return ScheduleList(schedules=[s for s in page if _reaches(who, jq, s)], next_after=next_after)


@router.get(
    "/schedules/{name}",
    response_model=ScheduleInfo,
    summary="One schedule",
    responses=declare(INVALID, UNAVAILABLE, NOT_FOUND),
)
async def get_schedule(
    request: Request, who: Annotated[Principal, require(Scope.READ)], name: NamePath
) -> ScheduleInfo:
    return await _reachable(request, who, name)


@router.patch(
    "/schedules/{name}",
    response_model=ScheduleInfo,
    summary="Change a schedule",
    responses=declare(
        BODY,
        INVALID,
        UNAVAILABLE,
        NOT_FOUND,
        FORBIDDEN,
        {409: {"description": "Declared in code: only pausing applies", "model": Problem}},
    ),
)
async def update_schedule(
    request: Request,
    who: Annotated[Principal, require(Scope.SCHEDULES)],
    name: NamePath,
    patch: SchedulePatch,
) -> ScheduleInfo:
    """A changed timing, or a schedule enabled again, starts from its next tick after
    now; otherwise its next tick is kept. Takes effect within a second everywhere."""
    given = {f: getattr(patch, f) for f in FIELDS if f in patch.model_fields_set}
    if not given:
        raise HTTPException(
            422, detail=[field_error(["body"], "name at least one field to change", "missing")]
        )
    for field in ("type", "timezone", "payload", "missed", "enabled"):
        if field in given and given[field] is None:
            raise HTTPException(
                422, detail=[field_error(["body", field], "may not be null", "null")]
            )
    if given.get("cron") is not None and given.get("every") is not None:
        _one_timing(given["cron"], given["every"])
    if "missed" in given:
        given["missed"] = given["missed"].value
    jq = jobqueue(request)
    current = await _reachable(request, who, name)
    _may_use(who, jq, given.get("type", current.type), given.get("queue", current.queue))
    if current.source != "code" and given.keys() & {"type", "queue", "payload"}:
        await _runnable(request, given.get("type", current.type),
                        given.get("queue", current.queue),
                        given.get("payload", current.payload) or {})  # fmt: skip
    with _field_errors():
        return await jq.schedules.update(name, by=Actor.of(who), **given)


@router.delete(
    "/schedules/{name}",
    status_code=204,
    summary="Delete a schedule",
    responses=declare(
        INVALID,
        UNAVAILABLE,
        NOT_FOUND,
        {409: {"description": "Declared in code: remove it there", "model": Problem}},
    ),
)
async def delete_schedule(
    request: Request, who: Annotated[Principal, require(Scope.SCHEDULES)], name: NamePath
) -> Response:
    """The jobs it enqueued stay."""
    await _reachable(request, who, name)
    await jobqueue(request).schedules.delete(name, by=Actor.of(who))
    return Response(status_code=204)


@router.post(
    "/schedules/{name}/pause",
    response_model=ScheduleInfo,
    summary="Pause a schedule",
    responses=declare(INVALID, UNAVAILABLE, NOT_FOUND),
)
async def pause_schedule(
    request: Request, who: Annotated[Principal, require(Scope.SCHEDULES)], name: NamePath
) -> ScheduleInfo:
    """No tick is enqueued until it is resumed; the ticks in between are skipped.
    Schedules declared in code can be paused too."""
    await _reachable(request, who, name)
    return await jobqueue(request).schedules.pause(name, by=Actor.of(who))


@router.post(
    "/schedules/{name}/resume",
    response_model=ScheduleInfo,
    summary="Resume a schedule",
    responses=declare(INVALID, UNAVAILABLE, NOT_FOUND),
)
async def resume_schedule(
    request: Request, who: Annotated[Principal, require(Scope.SCHEDULES)], name: NamePath
) -> ScheduleInfo:
    """It ticks again from its next tick after now."""
    await _reachable(request, who, name)
    return await jobqueue(request).schedules.resume(name, by=Actor.of(who))


@router.post(
    "/schedules/{name}/trigger",
    status_code=201,
    response_model=Job,
    summary="Enqueue a schedule's job now",
    responses=declare(INVALID, UNAVAILABLE, NOT_FOUND),
)
async def trigger_schedule(
    request: Request, who: Annotated[Principal, require(Scope.SCHEDULES)], name: NamePath
) -> Job:
    """One job, as a tick would make it, due now; paused or not. The next tick is kept."""
    await _reachable(request, who, name)
    job = await jobqueue(request).schedules.trigger(name, by=Actor.of(who))
    return access.shown(job, who)


# -- helpers ---------------------------------------------------------------------------


def _one_timing(cron: str | None, every: str | None) -> None:
    if (cron is None) == (every is None):
        what = "not both" if cron is not None else "one of them"
        raise HTTPException(
            422,
            detail=[field_error(["body", "cron"], f"give either cron or every: {what}", "timing")],
        )


async def _reachable(request: Request, who: Principal, name: str) -> ScheduleInfo:
    """The schedule, or a 404 if it is missing or out of the token's reach."""
    jq = jobqueue(request)
    found = await jq.schedules.get(name)
    if not _reaches(who, jq, found):
        raise ScheduleNotFound(name)
    return found


def _reaches(who: Principal, jq: JobQueue, schedule: ScheduleInfo) -> bool:
    return not who.restricted or who.allows(
        queue=jq.schedules.queue_of(schedule), type=schedule.type
    )


def _may_use(who: Principal, jq: JobQueue, type: str, queue: str | None) -> None:
    if not who.restricted:
        return
    options: dict[str, Any] = {} if queue is None else {"queue": queue}
    resolved, _, _ = jq.schedules.rows().options(type, options)  # type: ignore[arg-type]
    refusal = access.may_enqueue(who, queue=resolved.queue, type=type, field="body")
    if refusal is not None:
        raise refusal


async def _runnable(
    request: Request, type_: str, queue: str | None, payload: dict[str, Any]
) -> None:
    """What POST /jobs asks of a job, asked of the schedule's jobs before it is stored:
    a payload that its task's type or its declared type's schema takes, no larger than
    JOBQUEUE_MAX_PAYLOAD_BYTES, and, where this process checks types (not `jobqueue api`
    alone), a type that something runs: a task here, a declaration, or a live worker's
    announcement. Else a mistyped type would enqueue, at every tick, a job that nothing
    runs."""
    jq = jobqueue(request)
    check_types = request.app.state.check_types
    new = NewJob.model_construct(type=type_, queue=queue, payload=payload)
    problems = check(jq, check_types, new, ["body"], await known(jq, [new], check_types))
    if problems:
        raise HTTPException(problems_status(problems), detail=problems)


@contextlib.contextmanager
def _field_errors() -> Iterator[None]:
    """A ValueError of jobqueue.schedules (``field: message``) as a 422 naming the
    field; a payload that its task's type refuses, one error per bad field."""
    try:
        yield
    except PayloadError as exc:
        errors = [field_error(["body", "payload", *e["loc"]], e["msg"], e["type"])
                  for e in exc.errors]  # fmt: skip
        raise HTTPException(422, detail=errors) from None
    except ValueError as exc:
        field, _, message = str(exc).partition(": ")
        raise HTTPException(
            422, detail=[field_error(["body", field], message or field, "value_error")]
        ) from None
