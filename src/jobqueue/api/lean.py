"""The API's hot operations without FastAPI's request handling: POST /jobs and POST
/jobs/batch (api/enqueue.py), and the claims and outcomes of workers over HTTP, POST
/claims and POST /outcomes (api/lean_work.py).

FastAPI's work per request cost more CPU than storing a job: its exception and
exit-stack middleware, its routing, resolving the dependencies, reading the header
parameters, validating the body as a parameter, validating and encoding the answer.
So these operations are served by ``LeanRoutes``, a plain ASGI middleware inside
RequestMetrics and BodyLimit, so they count and limit these requests as any other
(only api/media.py's JsonBodies, which answers a body that is not JSON, is inside it).
Each endpoint reads the few headers it uses, parses the body with ``json.loads`` and
validates it with the FastAPI route's own model, authenticates as ``require`` does,
does what the route does through the same functions, and writes the answer's bytes
itself. An exception is answered by the application's own exception handlers, as
ExceptionMiddleware would, so the 401/403/409/410/413/422/429/503 answers are the
FastAPI routes' own.

What an endpoint does not take, it hands on, untouched, to the rest of the application,
where the FastAPI route answers it as it always did: a body that is not JSON or not
valid for the model, a content type other than ``application/json`` (JsonBodies' 415,
or an ``application/*+json`` type for the FastAPI route), a request to an application
mounted under a prefix, and every request while FastAPI's own OpenTelemetry
instrumentation is on (its server span is named by the route FastAPI's router
selects). So every parsing error keeps its shape, and the FastAPI routes stay the one
declaration of the operations in the OpenAPI document
(tests/integration/test_api_lean.py serves every request both ways and compares).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Where FastAPI's native OpenTelemetry instrumentation keeps a request's telemetry.
FASTAPI_TELEMETRY = "fastapi.telemetry"
_JSON_HEADERS = [(b"content-type", b"application/json")]


class Endpoint(Protocol):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """Answer the request, or return its body for the rest of the application."""
        ...


class LeanRoutes:
    """The middleware that serves the POSTs to the paths of ``endpoints``."""

    def __init__(self, app: ASGIApp, endpoints: Mapping[str, Endpoint]) -> None:
        self.app = app
        self.endpoints = endpoints

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = (
            self.endpoints.get(scope["path"])
            if scope["type"] == "http" and scope["method"] == "POST"
            else None
        )
        if endpoint is None or scope.get("root_path") or scope.get(FASTAPI_TELEMETRY):
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            untaken = await endpoint(scope, receive, sending)
        except Exception as exc:
            handler = _handler(scope["app"].exception_handlers, exc)
            if handler is None or started:
                raise  # ServerErrorMiddleware's: a 500
            request = Request(scope, receive)
            if inspect.iscoroutinefunction(handler):
                response = await handler(request, exc)
            else:
                response = await run_in_threadpool(handler, request, exc)
            if response is not None:
                await response(scope, receive, send)
            exc.__traceback__ = None  # an exception reused across requests keeps none
            return
        if untaken is not None:
            await hand_on(self.app, scope, untaken, receive, send)


def _handler(handlers: Mapping[Any, Any], exc: Exception) -> Any:
    """The application's handler of ``exc``, as ExceptionMiddleware finds it: by status
    for an HTTPException, else by class; a handler of every Exception (500) is
    ServerErrorMiddleware's."""
    if isinstance(exc, HTTPException) and exc.status_code != 500:
        found = handlers.get(exc.status_code)
        if found is not None:
            return found
    for kind in type(exc).__mro__:
        if kind is Exception:
            return None
        if kind in handlers:
            return handlers[kind]
    return None


async def read_body(receive: Receive) -> bytes | None:
    """The request's body, or None if the client disconnected before sending it all.
    A body over JOBQUEUE_MAX_REQUEST_BYTES raises the 413 here (api/body_size.py)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def hand_on(app: ASGIApp, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
    """The request to the rest of the application, with its body as it was received."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    await app(scope, replay, send)


async def respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    """A JSON answer, with the headers Starlette's Response would give it."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", b"%d" % len(body)), *_JSON_HEADERS, *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


def headers_of(scope: Scope, names: frozenset[bytes]) -> dict[bytes, bytes]:
    """The request's headers among ``names`` (lowercase, as ASGI gives them): the first
    of each, as Starlette reads them."""
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        if name in names and name not in found:
            found[name] = value
    return found


def parse_json(model: type[BaseModel], content_type: bytes | None, body: bytes) -> Any:
    """The body as the FastAPI route would validate it with ``model``, or None where that
    route would answer an error or read the body another way."""
    # application/json, with or without parameters, as FastAPI reads it; the
    # application/*+json types FastAPI also reads are left to the FastAPI route.
    if content_type is None or content_type.partition(b";")[0].strip().lower() != (
        b"application/json"
    ):
        return None
    try:
        # As FastAPI parses (json.loads of the bytes) and validates (in Python mode): a
        # body is taken here only if the FastAPI route would take it.
        return model.model_validate(json.loads(body))
    except Exception:  # any error is answered by the FastAPI route, in its shape
        return None


def client_of(scope: Scope) -> str:
    """The client's address, as ``request.client.host`` gives it."""
    return scope["client"][0] if scope.get("client") else "unknown"


def text(value: bytes | None) -> str | None:
    # Header values are bytes; Starlette decodes them as latin-1.
    return None if value is None else value.decode("latin-1")
