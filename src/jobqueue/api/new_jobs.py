"""Storing new jobs once their request is parsed: what the models cannot check alone
(payload size and type, a handler for the type, no unique key in a batch), the token's
reach, and the Idempotency-Key. The FastAPI routes of POST /jobs and POST /jobs/batch
(job_routes.py) and the middleware that serves most of their requests (enqueue.py)
store through ``enqueue_one`` and ``enqueue_batch``; POST /workflows
(workflow_routes.py) checks its jobs with ``check``, ``queue_of`` and
``problems_status``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from fastapi import HTTPException

from jobqueue.api import idempotency_header
from jobqueue.api.errors import field_error
from jobqueue.api.schemas import NewJobs
from jobqueue.app import JobQueue
from jobqueue.auth import access
from jobqueue.enqueue.idempotency import IdempotencyKey, IdempotencyKeyReused
from jobqueue.enqueue.new_job import NewJob
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
    served = await announced(jq, [new]) if check_types and new.type not in jq.tasks else NONE
    problems = check(jq, check_types, new, ["body"], served)
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
    served = await announced(jq, batch.jobs) if check_types else NONE
    problems = [
        problem
        for i, new in enumerate(batch.jobs)
        for problem in check(jq, check_types, new, ["body", "jobs", i], served)
    ]
    if problems:
        raise HTTPException(problems_status(problems), detail=problems)
    for i, new in enumerate(batch.jobs):
        where = queue_of(jq, new)
        refused = access.may_enqueue(who, queue=where, type=new.type, field=f"jobs.{i}")
        if refused is not None:
            raise refused
    return await jq.enqueue_jobs(batch.jobs, headers=trace)


NONE: frozenset[tuple[str, str]] = frozenset()


async def announced(jq: JobQueue, news: Iterable[NewJob]) -> frozenset[tuple[str, str]]:
    """The (queue, type) pairs of ``news`` with no task here that a live worker
    announces (a worker over HTTP names the types it serves when it claims; another
    process's Python worker names its tasks'): their jobs are accepted too. A query
    per queue, only for types this process has no task for."""
    unknown = {(queue_of(jq, new), new.type) for new in news if new.type not in jq.tasks}
    served: set[tuple[str, str]] = set()
    for queue in {queue for queue, _ in unknown}:
        served.update((queue, type_) for type_ in await jq.inspect.handled_types(queue))
    return frozenset(unknown & served)


def check(
    jq: JobQueue,
    check_types: bool,
    new: NewJob,
    loc: list[str | int],
    served: frozenset[tuple[str, str]] = NONE,
) -> list[dict[str, object]]:
    """What the model cannot check alone: the payload's size and the type's handler (a
    task here, or a live worker's, ``served``), and in a batch, that no job has a
    unique key."""
    problems = []
    if "jobs" in loc and new.unique_key is not None:
        problems.append(
            field_error(
                [*loc, "unique_key"], "not supported in a batch; use POST /jobs", "not_supported"
            )
        )
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
    if check_types and task is None and (queue_of(jq, new), new.type) not in served:
        known = ", ".join(sorted(jq.tasks)) or "none"
        problems.append(
            field_error(
                [*loc, "type"],
                f"no handler is registered for type {new.type!r}, and no live worker of its "
                f"queue announces one; known types: {known}",
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
