"""The service's own endpoints, for operators and their tools: the worker processes,
liveness (/healthz), readiness (/readyz) and the Prometheus metrics (/metrics)."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import JSONResponse

from jobqueue import release
from jobqueue.api.responses import UNAVAILABLE
from jobqueue.api.schemas import Health, Readiness
from jobqueue.api.state import jobqueue
from jobqueue.auth import access
from jobqueue.auth.authenticator import require
from jobqueue.db.migrate import code_version
from jobqueue.db.pool import is_unavailable
from jobqueue.model.job import WorkerInfo
from jobqueue.model.tokens import Principal, Scope

router = APIRouter()

READY_TIMEOUT_SECONDS = 2.0


@router.get(
    "/workers",
    response_model=list[WorkerInfo],
    summary="Worker processes",
    responses=UNAVAILABLE,
)
async def list_workers(
    request: Request, who: Annotated[Principal, require(Scope.READ)]
) -> list[WorkerInfo]:
    """Every worker process with a recent heartbeat: host, pid, queues, slots and how many
    jobs it runs now. A token restricted to queues sees the workers that serve one of
    them, and of each only those queues."""
    return access.workers_shown(await jobqueue(request).workers(), who)


@router.get("/healthz", response_model=Health, summary="Is the process alive?")
async def healthz() -> Health:
    """The process answers, with its release; says nothing about the database (see
    /readyz)."""
    return Health(status="ok", version=release.version(), schema_version=code_version())


@router.get(
    "/readyz",
    response_model=Readiness,
    summary="Can the database be reached?",
    responses={503: {"description": "The database did not answer", "model": Readiness}},
)
async def readyz(request: Request) -> Response:
    """200 when the database answers within 2 s, else 503; `listener` says whether workers
    are woken by NOTIFY or, while it is down, by polling."""
    jq = jobqueue(request)
    listener = request.app.state.listener_health()
    try:
        await asyncio.wait_for(jq.ping(), READY_TIMEOUT_SECONDS)
    except Exception as exc:
        if not is_unavailable(exc):
            raise
        body = Readiness(status="unavailable", database="unreachable", listener=listener)
        return JSONResponse(body.model_dump(), status_code=503)
    return JSONResponse(Readiness(status="ready", database="ok", listener=listener).model_dump())


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={
        200: {
            "description": "The Prometheus text exposition format (see docs/observability.md)",
            "content": {"text/plain": {}},
        },
        404: {"description": "Metrics are off (JOBQUEUE_METRICS=off)"},
        503: {"description": "The API tokens cannot be read (the database is unavailable)"},
    },
)
async def metrics(request: Request, who: Annotated[Principal, require(Scope.METRICS)]) -> Response:
    """This process's metrics: its jobs, attempts, claims, pool and HTTP requests, and
    the queue gauges if it holds the maintenance lead."""
    exporter = request.app.state.metrics
    if exporter is None:
        raise HTTPException(404, detail="metrics are off (JOBQUEUE_METRICS=off)")
    body, content_type = exporter.exposition()
    return Response(body, media_type=content_type)
