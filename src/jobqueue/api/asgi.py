"""The ASGI application (FastAPI) that serves a JobQueue over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute

from jobqueue.api import (
    audit_routes,
    enqueue,
    errors,
    job_edit_routes,
    job_routes,
    lean,
    lean_work,
    limit_routes,
    media,
    operation_routes,
    queue_routes,
    refusals,
    schedule_routes,
    search_routes,
    signal_routes,
    token_routes,
    work_routes,
    workflow_routes,
)
from jobqueue.api.body_size import BodyLimit
from jobqueue.api.schemas import NewJobs
from jobqueue.app import JobQueue
from jobqueue.auth import authenticator
from jobqueue.enqueue.new_job import NewJob

if TYPE_CHECKING:
    from jobqueue.observability.metrics import ProcessMetrics


def create_app(
    jq: JobQueue,
    *,
    check_types: bool = True,
    listener_health: Callable[[], str | None] = lambda: None,
    metrics: ProcessMetrics | None = None,
    open_without_tokens: bool = True,
    admin_secret: str | None = None,
) -> FastAPI:
    """``check_types``: refuse job types with no registered handler (off for `jobqueue api`
    alone, which does not know the workers' handlers). ``metrics``: what GET /metrics
    serves, and counts the requests (None: metrics are off, /metrics is a 404).
    ``open_without_tokens``: while no token exists, let requests through (a loopback
    bind); else every request needs a token. ``admin_secret``: the bootstrap token
    (JOBQUEUE_ADMIN_TOKEN), with every scope."""
    app = FastAPI(
        title="jobqueue",
        summary="A background job service on PostgreSQL.",
        version="0.1.0",
    )
    app.state.jobqueue = jq
    app.state.check_types = check_types
    app.state.listener_health = listener_health
    app.state.metrics = metrics
    # Set when the server begins to stop: long-polls answer at once instead of
    # holding the shutdown up.
    app.state.stopping = asyncio.Event()
    app.state.auth = authenticator.Authenticator(
        jq.store,
        open_without_tokens=open_without_tokens,
        admin_secret=admin_secret,
        max_failures=jq.settings.auth_max_failures,
    )
    app.state.refusals = refusals.RefusalLog(jq.store)
    # In this order: FastAPI matches a request against the routes in the order included.
    routers = [job_routes.router, job_edit_routes.router, queue_routes.router,
               operation_routes.router, token_routes.router, audit_routes.router,
               limit_routes.router, workflow_routes.router, schedule_routes.router,
               work_routes.router, search_routes.router, signal_routes.router]  # fmt: skip
    for each in routers:
        app.include_router(each)
    authenticator.install(app, routers)
    errors.install(app)
    # Innermost: a body that is not JSON is a 415 (what LeanRoutes hands on, too).
    app.add_middleware(media.JsonBodies, routes=media.json_routes(routers))
    # BodyLimit and RequestMetrics see LeanRoutes' requests as any other.
    app.add_middleware(lean.LeanRoutes, endpoints=lean_endpoints(routers))
    app.add_middleware(BodyLimit, max_request_bytes=jq.settings.max_request_bytes)
    if metrics is not None:  # outermost: it sees every answer, a 413 included
        from jobqueue.observability.metrics import RequestMetrics

        app.add_middleware(RequestMetrics, metrics=metrics.metrics)
        metrics.registry.register(app.state.auth)  # its reads of the tokens
    return app


def lean_endpoints(routers: Iterable[APIRouter]) -> dict[str, lean.Endpoint]:
    """What api/lean.py serves without FastAPI, by path, each with its FastAPI route
    (what RequestMetrics labels the requests with)."""
    made: dict[str, Callable[[APIRoute], lean.Endpoint]] = {
        "/jobs": lambda route: enqueue.Enqueue(route, NewJob),
        "/jobs/batch": lambda route: enqueue.Enqueue(route, NewJobs),
        "/claims": lean_work.Claims,
        "/outcomes": lean_work.Outcomes,
    }
    return {
        route.path: made[route.path](route)
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute) and route.path in made and "POST" in (route.methods or ())
    }
