"""POST /claims and POST /outcomes, the calls a worker over HTTP makes for every batch
of jobs, as api/lean.py's middleware serves them: the body validated with the FastAPI
route's model (ClaimRequest, OutcomesRequest), the token checked for ``jobs:work``, and
the work done by the routes' own functions (``work_routes.claimed``,
``work_routes.applied``); the answer encoded by its model as the route would."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from jobqueue.api.lean import client_of, headers_of, parse_json, read_body, respond, text
from jobqueue.api.work_routes import applied, claimed
from jobqueue.api.work_schemas import ClaimRequest, OutcomesRequest
from jobqueue.model.tokens import Scope as TokenScope

READ_HEADERS = frozenset((b"content-type", b"authorization"))


class Claims:
    def __init__(self, route: Any) -> None:
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """Answer the request, or return its body for the rest of the application."""
        headers = headers_of(scope, READ_HEADERS)
        body = await read_body(receive)
        if body is None:
            return None  # the client went away
        order = parse_json(ClaimRequest, headers.get(b"content-type"), body)
        if order is None:
            return body
        scope["route"] = self.route
        jq = scope["app"].state.jobqueue
        client = client_of(scope)
        who = await scope["app"].state.auth.authenticate(
            text(headers.get(b"authorization")), client, TokenScope.WORK
        )
        # A long poll notices a client gone while it waits: Starlette's check of it.
        gone = Request(scope, receive).is_disconnected
        await answer(send, await claimed(jq, who, order, client, gone))
        return None


class Outcomes:
    def __init__(self, route: Any) -> None:
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """Answer the request, or return its body for the rest of the application."""
        headers = headers_of(scope, READ_HEADERS)
        body = await read_body(receive)
        if body is None:
            return None
        given = parse_json(OutcomesRequest, headers.get(b"content-type"), body)
        if given is None:
            return body
        scope["route"] = self.route
        who = await scope["app"].state.auth.authenticate(
            text(headers.get(b"authorization")), client_of(scope), TokenScope.WORK
        )
        await answer(send, await applied(scope["app"].state.jobqueue, who, given))
        return None


async def answer(send: Send, model: BaseModel) -> None:
    """A 200 with ``model`` as JSON, as FastAPI encodes a route's response model."""
    await respond(send, 200, model.model_dump_json().encode(), [])
