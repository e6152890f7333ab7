"""POST /jobs and POST /jobs/batch without FastAPI's request handling.

Enqueueing is the API's hot path, and FastAPI's work per request (resolving the
dependencies, reading the header parameters, validating the body as a parameter,
routing through included routers) cost more CPU than storing the job. So these two
routes are also served by plain ASGI endpoints, placed before FastAPI's: they read the
few headers they use, parse the body with ``json.loads`` and validate it with the same
models (NewJob, NewJobs), authenticate as ``require`` does, store the job through the
same functions as the FastAPI routes (``routes.enqueue_one``, ``routes.enqueue_batch``),
and write the answer's bytes themselves. They run inside the same middleware and
exception handlers, so metrics, body limits, and the 401/403/413/422/429/503 answers
those functions raise are the FastAPI routes' own.

What they cannot take, they hand on, untouched, to the FastAPI route (routes.py): a body
that is not JSON or not valid for the model, a content type other than
``application/json``, a malformed ``Idempotency-Key``. That route answers it as it
always did, so every parsing error keeps its shape, and the FastAPI route stays the one
declaration of the operation in the OpenAPI document.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobqueue import fields
from jobqueue.api import access
from jobqueue.api.routes import enqueue_batch, enqueue_one
from jobqueue.api.schemas import NewJobs
from jobqueue.encoding import to_json
from jobqueue.new_job import NewJob
from jobqueue.tokens import Scope as TokenScope

# Set in the scope of a request handed on, so that routing passes these routes by.
HANDED_ON = "jobqueue.handed_on"
# The headers read, by their lowercase names as ASGI gives them.
READ_HEADERS = frozenset(
    (b"content-type", b"authorization", b"idempotency-key", b"traceparent", b"tracestate")
)
# The Idempotency-Key parameter's bounds in routes.create_job (a quoted key's quotes
# included); outside them the FastAPI route answers its 422.
IDEMPOTENCY_KEY_LENGTH = range(1, fields.UNIQUE_KEY_MAX_LENGTH + 3)
_JSON_HEADERS = [(b"content-type", b"application/json")]


class LeanRoute(Route):
    """A POST route served by a plain ASGI endpoint, until it hands a request on."""

    def __init__(self, path: str, endpoint: Any) -> None:
        super().__init__(path, endpoint, methods=["POST"], include_in_schema=False)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        # Not even a partial match for other methods: a GET or a 405 goes on to
        # FastAPI's routes exactly as before.
        if scope["type"] != "http" or scope["method"] != "POST" or HANDED_ON in scope:
            return Match.NONE, {}
        if scope.get("root_path"):  # mounted: Starlette's own matching takes it off
            match, child = super().matches(scope)
        elif scope["path"] == self.path:  # a path without parameters: no pattern to run
            match, child = Match.FULL, {"endpoint": self.endpoint, "path_params": {}}
        else:
            return Match.NONE, {}
        if match is Match.FULL:
            child["route"] = self  # the template RequestMetrics labels the request with
        return match, child


class Enqueue:
    """The ASGI endpoint of POST /jobs (``batch`` False) or POST /jobs/batch."""

    def __init__(self, router: ASGIApp, *, batch: bool) -> None:
        """``router``: the FastAPI application's, which requests are handed on to."""
        self.router = router
        self.model: type[BaseModel] = NewJobs if batch else NewJob

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            if name in READ_HEADERS and name not in headers:  # the first, as Starlette reads
                headers[name] = value
        body = await read_body(receive)
        if body is None:
            return  # the client went away
        parsed = self.parse(headers.get(b"content-type"), body)
        key = _text(headers.get(b"idempotency-key"))
        if parsed is None or (key is not None and len(key) not in IDEMPOTENCY_KEY_LENGTH):
            await hand_on(self.router, scope, body, receive, send)
            return
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
            return
        assert isinstance(parsed, NewJob)
        job, created = await enqueue_one(
            state.jobqueue, who, parsed, check_types=state.check_types,
            idempotency_key=key, trace=trace,
        )  # fmt: skip
        location = [(b"location", b"/jobs/%d" % job.id)]
        await respond(send, 201 if created else 200, to_json(access.shown(job, who)), location)

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
    A body over JOBQUEUE_MAX_REQUEST_BYTES raises the 413 here (api/limits.py)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def hand_on(router: ASGIApp, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
    """Route the request again, past these routes, with its body as it was received.
    Through the application's own router, not ``scope["router"]``: in an application
    mounted in another, that is the outer one, which would route the path anew."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    scope[HANDED_ON] = True
    await router(scope, replay, send)


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


def routes(router: ASGIApp) -> list[Route]:
    """The routes to put before FastAPI's, in ``router``."""
    return [
        LeanRoute("/jobs", Enqueue(router, batch=False)),
        LeanRoute("/jobs/batch", Enqueue(router, batch=True)),
    ]
