"""Request bodies are JSON: a body of another media type is a 415 naming
``application/json``, before anything else reads it.

Without this, FastAPI reads a body sent as ``text/plain``, as a form
(``application/x-www-form-urlencoded``, what ``curl -d`` sends unless told otherwise) or
with no ``Content-Type`` at all as bytes, and answers "Input should be a valid
dictionary": a 422 that names the body, not the header at fault. A body with no
``Content-Type`` is refused too, as FastAPI refuses to read it as JSON: a web page can
send such a request across origins without a CORS preflight, and the API may be open
on loopback (docs/security.md). ``application/json`` and the ``application/*+json``
types, parameters aside, are read as JSON. A request with no body is let through: its
route answers the missing body (a 422 naming ``body``).

``JsonBodies`` is the innermost middleware, below api/enqueue.py's: the POST /jobs and
POST /jobs/batch that it serves, JSON all, never come here, and it hands every body of
another type on to this one.
"""

from __future__ import annotations

from collections.abc import Iterable

from fastapi import APIRouter, params
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from jobqueue.api.errors import field_error

JSON = "application/json"
# The methods whose routes may take a body.
_WITH_BODY = frozenset(("POST", "PUT", "PATCH"))
_HINTS = {
    "application/x-www-form-urlencoded": " (what curl -d sends unless told: add "
    "-H 'Content-Type: application/json', or use curl --json)",
}


def is_json(content_type: str | None) -> bool:
    """Whether FastAPI reads a body of ``content_type`` as JSON."""
    if content_type is None:
        return False
    kind = content_type.partition(";")[0].strip().lower()
    return kind == JSON or (kind.startswith("application/") and kind.endswith("+json"))


def refusal(content_type: str | None, method: str) -> JSONResponse:
    """The 415, naming the type a body must have (and, in ``Accept-Post`` or
    ``Accept-Patch``, RFC 9110's place for it)."""
    if content_type is None:
        msg = f"the body needs the header Content-Type: {JSON}"
    else:
        kind = content_type.partition(";")[0].strip().lower()
        msg = f"must be {JSON}, got {content_type!r}{_HINTS.get(kind, '')}"
    error = field_error(["header", "Content-Type"], msg, "unsupported_media_type")
    headers = {f"Accept-{method.title()}": JSON} if method in ("POST", "PATCH") else None
    return JSONResponse({"detail": [error]}, status_code=415, headers=headers)


class JsonBodies:
    """The middleware that answers 415 to a body of another type than JSON sent to one
    of ``routes``, those that read a JSON body (``json_routes``)."""

    def __init__(self, app: ASGIApp, routes: list[APIRoute]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _WITH_BODY:
            await self.app(scope, receive, send)
            return
        content_type = None
        has_body = False
        for name, value in scope["headers"]:
            if name == b"content-type" and content_type is None:  # the first, as Starlette
                content_type = value.decode("latin-1")
            elif name == b"content-length":
                has_body = has_body or value.strip() not in (b"0", b"")
            elif name == b"transfer-encoding":
                has_body = True
        if not has_body or is_json(content_type):
            await self.app(scope, receive, send)
            return
        route = self.route(scope)
        if route is None:
            await self.app(scope, receive, send)
            return
        scope["route"] = route  # what RequestMetrics labels the answer with
        await refusal(content_type, scope["method"])(scope, receive, send)

    def route(self, scope: Scope) -> APIRoute | None:
        """The route of ``routes`` that takes this request, if one does."""
        for route in self.routes:
            if route.matches(scope)[0] is Match.FULL:
                return route
        return None


def json_routes(routers: Iterable[APIRouter]) -> list[APIRoute]:
    """The routes of ``routers`` that read a JSON body. (The application's own router
    holds them wrapped, where a route cannot be matched alone.)"""
    return [
        route
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute)
        and route.body_field is not None
        and not isinstance(route.body_field.field_info, params.Form)
    ]
