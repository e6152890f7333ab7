"""The queues' endpoints: every queue at a glance, pause and resume one. (A queue's
limits, PATCH /queues/{name}, are limit_routes.py's.)"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request

from jobqueue.api.responses import INVALID, UNAVAILABLE, declare
from jobqueue.api.schemas import QueueList, QueueName
from jobqueue.api.state import jobqueue
from jobqueue.audit import Actor
from jobqueue.auth import access
from jobqueue.auth.authenticator import require
from jobqueue.model.job import QueueInfo
from jobqueue.model.tokens import Principal, Scope

router = APIRouter()


@router.get(
    "/queues",
    response_model=QueueList,
    summary="Every queue at a glance",
    responses=UNAVAILABLE,
)
async def list_queues(
    request: Request, who: Annotated[Principal, require(Scope.READ)]
) -> QueueList:
    """Each queue with jobs or controls: its jobs by state, whether it is paused, and
    `oldest_pending_seconds`, how long its longest-waiting due job has waited (null when
    none is due). The counts are kept by triggers as jobs change, so this reads a few
    rows however many millions of jobs there are."""
    return QueueList(queues=access.queues_shown(await jobqueue(request).queues(), who))


@router.post(
    "/queues/{name}/pause",
    response_model=QueueInfo,
    summary="Pause a queue",
    responses=declare(INVALID, UNAVAILABLE),
)
async def pause_queue(
    request: Request, who: Annotated[Principal, require(Scope.QUEUES)], name: QueueName
) -> QueueInfo:
    """No worker starts a job of this queue until it is resumed; running jobs finish, and
    new jobs are still accepted. Takes effect at each worker's next claim."""
    access.may_control_queue(who, name)
    return await jobqueue(request).pause(name, by=Actor.of(who))


@router.post(
    "/queues/{name}/resume",
    response_model=QueueInfo,
    summary="Resume a queue",
    responses=declare(INVALID, UNAVAILABLE),
)
async def resume_queue(
    request: Request, who: Annotated[Principal, require(Scope.QUEUES)], name: QueueName
) -> QueueInfo:
    """Workers start the queue's jobs again at once (they are woken by NOTIFY)."""
    access.may_control_queue(who, name)
    return await jobqueue(request).resume(name, by=Actor.of(who))
