"""What a principal may see and touch: its token's queues and types, and its payloads.

A token restricted to queues or types acts as if the jobs outside them did not exist:
they are left out of lists and counts, their ids are a 404, and a filter over them
touches nothing. Enqueueing or pausing outside them is a 403, naming the queue or type,
since the caller named it. Without `payloads:read`, a job's payload and result and an
attempt's log, its checkpoint and its steps' results are null (a stored payload is
never null, so null means hidden).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TypeVar

from fastapi import HTTPException

from jobqueue.model.job import Attempt, Job, JobNotFound, QueueInfo, WorkerInfo
from jobqueue.model.steps import JobDetail
from jobqueue.model.tokens import Principal, Scope

J = TypeVar("J", bound=Job)


def visible(job: Job | None, who: Principal, job_id: int) -> Job:
    """``job`` as ``who`` may see it; JobNotFound if missing or out of reach."""
    if job is None or not who.allows(queue=job.queue, type=job.type):
        raise JobNotFound(job_id)
    return shown(job, who)


def shown(job: J, who: Principal) -> J:
    """``job`` without what only the payloads scope may read: its payload and result,
    its checkpoint and its steps' results."""
    if who.has(Scope.PAYLOADS):
        return job
    if isinstance(job, JobDetail):
        steps = [dataclasses.replace(step, result=None) for step in job.steps]
        return dataclasses.replace(job, payload=None, result=None, checkpoint=None, steps=steps)
    return dataclasses.replace(job, payload=None, result=None, checkpoint=None)


def shown_attempts(attempts: list[Attempt], who: Principal) -> list[Attempt]:
    if who.has(Scope.PAYLOADS):
        return attempts
    return [dataclasses.replace(a, log=None) for a in attempts]


class Forbidden(HTTPException):
    """A 403 for a queue or type out of the token's reach. ``refused``: what was
    refused, as the audit log's result names it (``queue=mail``; api/refusals.py)."""

    def __init__(self, detail: str, refused: str) -> None:
        super().__init__(403, detail=detail)
        self.refused = refused


def may_enqueue(who: Principal, *, queue: str, type: str, field: str) -> Forbidden | None:
    """The 403 to raise if ``who`` may not enqueue such a job, or None if it may."""
    if who.queues is not None and queue not in who.queues:
        return Forbidden(
            f"this token may not use queue {queue!r} ({field}.queue)", f"queue={queue}"
        )
    if who.types is not None and type not in who.types:
        return Forbidden(f"this token may not use type {type!r} ({field}.type)", f"type={type}")
    return None


def may_control_queue(who: Principal, queue: str) -> None:
    if who.queues is not None and queue not in who.queues:
        raise Forbidden(f"this token may not use queue {queue!r}", f"queue={queue}")


def reach(
    who: Principal, *, queue: str | None, type: str | None
) -> tuple[list[str] | None, list[str] | None] | None:
    """The queues and types a list or a filter may cover (None: any), or None when
    the filter asked for is wholly out of the token's reach."""
    queues = _set_within(queue, who.queues)
    types = _set_within(type, who.types)
    if queues == [] or types == []:
        return None
    return queues, types


def _set_within(wanted: str | None, allowed: frozenset[str] | None) -> list[str] | None:
    if allowed is None:
        return None if wanted is None else [wanted]
    if wanted is None:
        return sorted(allowed)
    return [wanted] if wanted in allowed else []


def workers_shown(workers: Iterable[WorkerInfo], who: Principal) -> list[WorkerInfo]:
    if who.queues is None:
        return list(workers)
    allowed = who.queues
    return [
        dataclasses.replace(w, queues=[q for q in w.queues if q in allowed])
        for w in workers
        if any(q in allowed for q in w.queues)
    ]


def queues_shown(queues: Iterable[QueueInfo], who: Principal) -> list[QueueInfo]:
    if who.queues is None:
        return list(queues)
    return [q for q in queues if q.name in who.queues]


def filters(
    who: Principal, *, queue: str | None, type: str | None
) -> list[tuple[str | None, str | None]]:
    """The (queue, type) filters, one per statement, that a control action by filter
    runs to stay within the token's reach: [] when nothing is within it."""
    scope = reach(who, queue=queue, type=type)
    if scope is None:
        return []
    queues, types = scope
    return [(q, t) for q in _any_of(queues) for t in _any_of(types)]


def _any_of(names: list[str] | None) -> list[str | None]:
    return [None] if names is None else list(names)
