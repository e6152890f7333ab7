"""POST /jobs and POST /jobs/batch without FastAPI's request handling.

Enqueueing is the API's hot path, and FastAPI's work per request cost more CPU than
storing the job: its exception and exit-stack middleware, its routing, resolving the
dependencies, reading the header parameters, validating the body as a parameter. So
these two operations are served by ``LeanEnqueue``, a plain ASGI middleware inside
RequestMetrics and BodyLimit, so they count and limit these requests as any other
(only api/media.py's JsonBodies, which answers a body that is not JSON, is inside it).
It reads the few headers it uses, parses the body with ``json.loads`` and validates it
with the same models (NewJob, NewJobs),
authenticates as ``require`` does, stores the job through the same functions as the
FastAPI routes (``new_jobs.enqueue_one``, ``new_jobs.enqueue_batch``), and writes the
answer's bytes itself. An exception is answered by the application's own exception
handlers, as ExceptionMiddleware would, so the 401/403/410/413/422/429/503 answers are
the FastAPI routes' own.

What it does not take, it hands on, untouched, to the rest of the application, where
the FastAPI route answers it as it always did: a body that is not JSON or not valid for
the model, a content type other than ``application/json`` (JsonBodies' 415, or an
``application/*+json`` type for the FastAPI route), a malformed
``Idempotency-Key``, a request to an application mounted under a prefix, and every
request while FastAPI's own OpenTelemetry instrumentation is on (its server span is
named by the route FastAPI's router selects). So every parsing error keeps its shape,
and the FastAPI routes stay the one declaration of the operations in the OpenAPI
document.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobqueue.api.new_jobs import enqueue_batch, enqueue_one
from jobqueue.api.schemas import NewJobs
from jobqueue.auth import access
from jobqueue.encoding import to_json
from jobqueue.enqueue.new_job import NewJob
from jobqueue.model import fields
from jobqueue.model.tokens import Scope as TokenScope

# The headers read, by their lowercase names as ASGI gives them.
READ_HEADERS = frozenset(
    (b"content-type", b"authorization", b"idempotency-key", b"traceparent", b"tracestate")
)
# The Idempotency-Key parameter's bounds in job_routes.create_job (a quoted key's quotes
# included); outside them the FastAPI route answers its 422.
IDEMPOTENCY_KEY_LENGTH = range(1, fields.UNIQUE_KEY_MAX_LENGTH + 3)
# Where FastAPI's native OpenTelemetry instrumentation keeps a request's telemetry.
FASTAPI_TELEMETRY = "fastapi.telemetry"
_JSON_HEADERS = [(b"content-type", b"application/json")]


class LeanEnqueue:
    """The middleware that serves the POSTs to ``routes`` (their FastAPI routes by path:
    what RequestMetrics labels the requests with)."""

    def __init__(self, app: ASGIApp, routes: Mapping[str, Any]) -> None:
        self.app = app
        self.endpoints = {
            path: Enqueue(route, NewJobs if path.endswith("/batch") else NewJob)
            for path, route in routes.items()
        }

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


class Enqueue:
    """The endpoint of POST /jobs (``model`` NewJob) or POST /jobs/batch (NewJobs)."""

    def __init__(self, route: Any, model: type[BaseModel]) -> None:
        self.route = route
        self.model = model

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """Answer the request, or return its body for the rest of the application."""
        headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            if name in READ_HEADERS and name not in headers:  # the first, as Starlette reads
                headers[name] = value
        body = await read_body(receive)
        if body is None:
            return None  # the client went away
        parsed = self.parse(headers.get(b"content-type"), body)
        key = _text(headers.get(b"idempotency-key"))
        if parsed is None or (key is not None and len(key) not in IDEMPOTENCY_KEY_LENGTH):
            return body
        scope["route"] = self.route
        state = scope["app"].state
        client = scope["client"][0] if scope.get("client") else "unknown"
        who = await state.auth.authenticate(
            _text(headers.get(b"authorization")), client, TokenScope.ENQUEUE
        )
        trace = {
            "traceparent": _text(headers.get(b"traceparent")),
            "tracestate": _text(headers.get(b"tracestate")),
        }
        if isinstance(parsed, NewJobs):
            ids = await enqueue_batch(
                state.jobqueue, who, parsed, check_types=state.check_types, trace=trace
            )
            answer = json.dumps({"ids": ids, "count": len(ids)}, separators=(",", ":"))
            await respond(send, 201, answer.encode(), [])
            return None
        assert isinstance(parsed, NewJob)
        job, created = await enqueue_one(
            state.jobqueue, who, parsed, check_types=state.check_types,
            idempotency_key=key, trace=trace,
        )  # fmt: skip
        location = [(b"location", b"/jobs/%d" % job.id)]
        await respond(send, 201 if created else 200, to_json(access.shown(job, who)), location)
        return None

    def parse(self, content_type: bytes | None, body: bytes) -> BaseModel | None:
        """The body as the FastAPI route would validate it, or None where that route
        would answer an error or read the body another way."""
        # application/json, with or without parameters, as FastAPI reads it; the
        # application/*+json types FastAPI also reads are left to the FastAPI route.
        if content_type is None or content_type.partition(b";")[0].strip().lower() != (
            b"application/json"
        ):
            return None
        try:
            # As FastAPI parses (json.loads of the bytes) and validates (in Python
            # mode): a body is taken here only if the FastAPI route would take it.
            return self.model.model_validate(json.loads(body))
        except Exception:  # any error is answered by the FastAPI route, in its shape
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


def _text(value: bytes | None) -> str | None:
    # Header values are bytes; Starlette decodes them as latin-1.
    return None if value is None else value.decode("latin-1")
