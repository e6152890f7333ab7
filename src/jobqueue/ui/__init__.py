"""The web dashboard: queues, jobs, workers and schedules, live, in a browser.

``jobqueue.ui.app(jq)`` is an ASGI application to mount anywhere
(``app.mount("/jobs", jobqueue.ui.app(jq))``); `jobqueue serve` and `jobqueue api`
mount it at ``/ui``. Pages are rendered on the server (Jinja2), with one small script
and one stylesheet shipped in the package: no CDN, no build step (docs/dashboard.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from importlib import resources

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from jobqueue.app import JobQueue
from jobqueue.auth import session, tokens
from jobqueue.auth.authenticator import Authenticator
from jobqueue.db.pool import UNAVAILABLE_ERRORS
from jobqueue.model.job import JobNotFound, JobStateError
from jobqueue.ui import (
    audit_page,
    events,
    job_pages,
    login,
    overview,
    rendering,
    schedule_pages,
    worker_pages,
)
from jobqueue.ui.headers import SecurityHeaders
from jobqueue.ui.live import Hub

__all__ = ["app"]


def app(
    jq: JobQueue,
    *,
    authenticator: Authenticator | None = None,
    open_without_tokens: bool = False,
    stopping: asyncio.Event | None = None,
    api: ASGIApp | None = None,
) -> FastAPI:
    """The dashboard of ``jq``. ``authenticator``: the API's, to share its view of the
    tokens (by default, one of its own, reading JOBQUEUE_ADMIN_TOKEN). Then
    ``open_without_tokens``: with no token at all, let every browser in (off: mounted
    in an application of your own, the dashboard needs a token unless you say so).
    ``stopping``: set when the server stops, to end the live streams. ``api``: the
    HTTP API application the actions and the Audit page go through (None: one of the
    dashboard's own, on ``jq``)."""
    ui = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    ui.state.jobqueue = jq
    ui.state.auth = authenticator or Authenticator(
        jq.store,
        open_without_tokens=open_without_tokens,
        admin_secret=tokens.admin_secret(),
        max_failures=jq.settings.auth_max_failures,
    )
    ui.state.hub = Hub(jq)
    ui.state.stopping = stopping or asyncio.Event()
    # The actions and the Audit page go through the HTTP API's routes (see
    # jobqueue.ui.inprocess); mounted without one, the dashboard has one of its own.
    ui.state.api = api or _own_api(jq, ui.state.auth)
    static = resources.files("jobqueue.ui") / "static"
    ui.mount("/static", StaticFiles(directory=str(static)), name="static")
    # A module per section; FastAPI tries routes in the order they are included, which
    # is the order they were written in when these were one module.
    for section in (login, overview, job_pages, worker_pages, schedule_pages, audit_page, events):
        ui.include_router(section.router)
    ui.add_exception_handler(session.SignInNeeded, _sign_in)
    ui.add_exception_handler(HTTPException, _refused)
    ui.add_exception_handler(JobNotFound, _not_found)
    ui.add_exception_handler(JobStateError, _conflict)
    for unavailable in UNAVAILABLE_ERRORS:
        ui.add_exception_handler(unavailable, _unavailable)
    ui.add_middleware(SecurityHeaders)
    return ui


def _own_api(jq: JobQueue, auth: Authenticator) -> FastAPI:
    from jobqueue.api.asgi import create_app

    api = create_app(jq, check_types=False, open_without_tokens=auth.open_without_tokens)
    api.state.auth = auth  # one view of the tokens, and one failure count, for both
    return api


async def _sign_in(request: Request, exc: Exception) -> Response:
    return RedirectResponse(session.base_path(request) + "/login", 303)


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(request, exc.status_code, str(exc.detail), exc.headers)


async def _not_found(request: Request, exc: Exception) -> Response:
    return _error(request, 404, str(exc))


async def _unavailable(request: Request, exc: Exception) -> Response:
    return _error(request, 503, "The database is unavailable; try again in a moment.")


async def _conflict(request: Request, exc: Exception) -> Response:
    return _error(request, 409, str(exc))


def _error(
    request: Request, status: int, message: str, headers: Mapping[str, str] | None = None
) -> HTMLResponse:
    response = rendering.render(request, "error.html", None, status, live=False, message=message)
    for name, value in (headers or {}).items():
        if name.lower() == "retry-after":
            response.headers[name] = value
    return response
