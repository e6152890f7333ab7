"""Storing new jobs once their request is parsed: what the models cannot check alone
(payload size and type, a handler for the type, no unique key in a batch), the token's
reach, and the Idempotency-Key. The FastAPI routes of POST /jobs and POST /jobs/batch
(job_routes.py) and the middleware that serves most of their requests (enqueue.py)
store through ``enqueue_one`` and ``enqueue_batch``; POST /workflows
(workflow_routes.py) checks its jobs with ``known``, ``check``, ``queue_of`` and
``problems_status``. A type with no task here is checked against the declared types
(jobqueue.job_types) and those live workers announce.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fastapi import HTTPException

from jobqueue.api import idempotency_header
from jobqueue.api.errors import field_error
from jobqueue.api.schemas import NewJobs
from jobqueue.app import JobQueue
from jobqueue.auth import access
from jobqueue.enqueue.idempotency import IdempotencyKey, IdempotencyKeyReused
from jobqueue.enqueue.new_job import NewJob
from jobqueue.job_types import Checker
from jobqueue.model.job import Job
from jobqueue.model.tokens import Principal
from jobqueue.task import PayloadError, job_options

# One encoder for every request: json.dumps with options builds a new one each time.
_JSON = json.JSONEncoder(separators=(",", ":"))


async def enqueue_one(
    jq: JobQueue,
    who: Principal,
    new: NewJob,
    *,
    check_types: bool,
    idempotency_key: str | None,
    trace: dict[str, str | None],
) -> tuple[Job, bool]:
    """POST /jobs once its request is parsed: the job, and whether it is new. Raises
    the HTTPException to answer (IdempotentJobGone: the 410, see api/errors.py)."""
    problems = check(jq, check_types, new, ["body"], await known(jq, [new], check_types))
    if problems:
        raise HTTPException(problems_status(problems), detail=problems)
    refused = access.may_enqueue(who, queue=queue_of(jq, new), type=new.type, field="body")
    if refused is not None:
        raise refused
    remembered = None if idempotency_key is None else idempotency_of(jq, who, idempotency_key, new)
    try:
        return await jq.enqueue_job(new, headers=trace, idempotency_key=remembered)
    except IdempotencyKeyReused as exc:
        raise HTTPException(422, detail=[idempotency_error(str(exc), "reused")]) from exc


def idempotency_of(jq: JobQueue, who: Principal, header: str, new: NewJob) -> IdempotencyKey:
    """The request's key, its caller's, bound to the request (a 422 if malformed)."""
    try:
        key = idempotency_header.parse(header)
    except ValueError as exc:
        raise HTTPException(422, detail=[idempotency_error(str(exc), "invalid")]) from exc
    return IdempotencyKey(
        key=key,
        principal=who.name,
        request_hash=idempotency_header.request_hash(new),
        ttl_seconds=jq.settings.idempotency_ttl,
    )


def idempotency_error(msg: str, type: str) -> dict[str, object]:
    return field_error(["header", idempotency_header.HEADER], msg, f"idempotency_key_{type}")


async def enqueue_batch(
    jq: JobQueue,
    who: Principal,
    batch: NewJobs,
    *,
    check_types: bool,
    trace: dict[str, str | None],
) -> list[int]:
    """POST /jobs/batch once its request is parsed: the new jobs' ids."""
    types = await known(jq, batch.jobs, check_types)
    problems = [
        problem
        for i, new in enumerate(batch.jobs)
        for problem in check(jq, check_types, new, ["body", "jobs", i], types)
    ]
    if problems:
        raise HTTPException(problems_status(problems), detail=problems)
    for i, new in enumerate(batch.jobs):
        where = queue_of(jq, new)
        refused = access.may_enqueue(who, queue=where, type=new.type, field=f"jobs.{i}")
        if refused is not None:
            raise refused
    return await jq.enqueue_jobs(batch.jobs, headers=trace)


@dataclass(frozen=True)
class Known:
    """What makes a type with no task here acceptable: its declaration (`jobqueue types
    add`, with the payload schema it may hold), or a live worker announcing it."""

    declared: Mapping[str, Checker]
    # (queue, type) pairs a live worker announces (a worker over HTTP names the types
    # it serves when it claims; another process's Python worker names its tasks').
    served: frozenset[tuple[str, str]]


NOTHING = Known({}, frozenset())


async def known(jq: JobQueue, news: Iterable[NewJob], check_types: bool) -> Known:
    """What ``news`` need of declared and announced types: nothing for a type with a task
    here; the declared ones from the cache of jq.types (no query once warm); and, when
    types are checked, a query per queue of what live workers announce, for the rest."""
    untasked = [new for new in news if new.type not in jq.tasks]
    if not untasked:
        return NOTHING
    declared = await jq.types.checkers([new.type for new in untasked])
    if not check_types:
        return Known(declared, frozenset()) if declared else NOTHING
    unknown = {(queue_of(jq, new), new.type) for new in untasked if new.type not in declared}
    if not unknown:
        return Known(declared, frozenset())
    served: set[tuple[str, str]] = set()
    for queue in {queue for queue, _ in unknown}:
        served.update((queue, type_) for type_ in await jq.inspect.handled_types(queue))
    return Known(declared, frozenset(unknown & served))


def check(
    jq: JobQueue,
    check_types: bool,
    new: NewJob,
    loc: list[str | int],
    types: Known = NOTHING,
) -> list[dict[str, object]]:
    """What the model cannot check alone: the payload's size, its task's payload type or
    its declared type's schema, that the type has a handler (a task here, a declaration
    or a live worker's, ``types``)."""
    problems = []
    size = len(_JSON.encode(new.payload).encode())
    if size > jq.settings.max_payload_bytes:
        problems.append(
            field_error(
                [*loc, "payload"],
                f"payload is {size} bytes; the limit is {jq.settings.max_payload_bytes} "
                "(JOBQUEUE_MAX_PAYLOAD_BYTES)",
                "too_large",
            )
        )
    task = jq.tasks.get(new.type)
    if task is not None and task.payload_type is not None:
        try:
            task.dump(new.payload)
        except PayloadError as exc:
            problems.extend(
                field_error([*loc, "payload", *e["loc"]], e["msg"], e["type"]) for e in exc.errors
            )
    declared = types.declared.get(new.type) if task is None else None
    if declared is not None:
        problems.extend(
            field_error([*loc, "payload", *path], message, "payload_schema")
            for path, message in declared.problems(new.payload)
        )
    elif check_types and task is None and (queue_of(jq, new), new.type) not in types.served:
        known = ", ".join(sorted(jq.tasks)) or "none"
        problems.append(
            field_error(
                [*loc, "type"],
                f"no handler is registered for type {new.type!r}, no live worker of its "
                f"queue announces one, and it is not declared (jobqueue types add); "
                f"known types: {known}",
                "unknown_type",
            )
        )
    return problems


def queue_of(jq: JobQueue, new: NewJob) -> str:
    """The queue the job will be stored in, for a token's reach."""
    queue, _, _ = job_options(jq.tasks.get(new.type), jq.settings, new.queue)
    return queue


def problems_status(problems: list[dict[str, object]]) -> int:
    return 413 if all(p["type"] == "too_large" for p in problems) else 422
