"""What every page of the dashboard uses: the templates and their filters, render(),
the request's JobQueue, and the redirects that keep a browser within the dashboard.

Every page reads through the same seams as the HTTP API: the Authenticator for who
the browser acts as, jobqueue.auth.access for what that token may see (its queues and
types; payloads redacted without payloads:read), and the JobQueue for the data, which
comes from the counters, keyset pages and primary-key reads only (``jq.inspect``).
The pages themselves are in a module each by section: login, overview, job_pages,
worker_pages, audit_page, events; their POSTs go through jobqueue.ui.actions.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse

from jobqueue.app import JobQueue
from jobqueue.auth import session
from jobqueue.model.tokens import Principal
from jobqueue.ui.tracebacks import handler_frames

templates = jinja2.Environment(
    loader=jinja2.PackageLoader("jobqueue.ui", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


def jobqueue(request: Request) -> JobQueue:
    jq: JobQueue = request.app.state.jobqueue
    return jq


# -- the templates' filters ----------------------------------------------------------------


def ago(then: datetime | None, now: datetime | None = None) -> str:
    if then is None:
        return "—"
    seconds = ((now or datetime.now(UTC)) - then).total_seconds()
    return seconds_text(seconds) + (" ago" if seconds >= 0 else " from now")


def seconds_text(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    s = abs(seconds)
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def stamp(value: datetime | None) -> str:
    return "—" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


templates.filters.update(ago=ago, seconds=seconds_text, stamp=stamp, handler_frames=handler_frames)


# -- rendering -------------------------------------------------------------------------


def render(
    request: Request, name: str, who: Principal | None, status: int = 200, **context: Any
) -> HTMLResponse:
    session.prepare(request)
    page = templates.get_template(name).render(
        root=session.base_path(request),
        who=who,
        csrf=session.csrf_token(request),
        layout="partial.html" if request.headers.get("x-partial") == "1" else "base.html",
        live=context.pop("live", True),
        path=request.url.path,
        now=datetime.now(UTC),
        **context,
    )
    response = HTMLResponse(page, status)
    response.headers["cache-control"] = "no-store"
    session.set_browser_secret(request, response)
    return response


def within(request: Request, target: str | None, default: str) -> RedirectResponse:
    """303 to ``target``, a path within the dashboard (anything else: ``default``)."""
    return RedirectResponse(session.base_path(request) + local(target, default), 303)


def local(target: str | None, default: str) -> str:
    """``target`` if it is a path on this site, else ``default``: a browser reads
    ``//host`` and ``/\\host`` as another site."""
    if not target or not target.startswith("/") or target[1:2] in ("/", "\\"):
        return default
    return target
