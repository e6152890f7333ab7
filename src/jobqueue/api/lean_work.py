"""POST /claims and POST /outcomes, the calls a worker over HTTP makes for every batch
of jobs, as api/lean.py's middleware serves them: the body validated with the FastAPI
route's model (ClaimRequest, OutcomesRequest), the token checked for ``jobs:work``, and
the work done by the routes' own functions (``work_routes.claimed``,
``work_routes.applied``); their answers, plain values in their models' shape, encoded
as pydantic writes JSON (tests/integration/test_api_lean.py compares the two)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from jobqueue.api.lean import client_of, headers_of, parse_json, read_body, respond, text
from jobqueue.api.work_routes import applied, claimed
from jobqueue.api.work_schemas import ClaimRequest, OutcomesRequest
from jobqueue.model.tokens import Principal
from jobqueue.model.tokens import Scope as TokenScope

READ_HEADERS = frozenset((b"content-type", b"authorization"))
# The answers' JSON as pydantic writes it: compact, UTF-8 as it is. One encoder for
# every request (json.dumps with options builds a new one each time), with no check for
# values that hold themselves: they come from the database and from parsed JSON.
_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False)


class WorkEndpoint:
    """An operation of a worker over HTTP: its body validated with ``model``, its token
    checked for ``jobs:work``, and its answer ``run``'s model."""

    model: type[BaseModel]

    def __init__(self, route: Any) -> None:
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """Answer the request, or return its body for the rest of the application."""
        headers = headers_of(scope, READ_HEADERS)
        body = await read_body(receive)
        if body is None:
            return None  # the client went away
        given = parse_json(self.model, headers.get(b"content-type"), body)
        if given is None:
            return body
        scope["route"] = self.route
        client = client_of(scope)
        who = await scope["app"].state.auth.authenticate(
            text(headers.get(b"authorization")), client, TokenScope.WORK
        )
        answer = await self.run(scope, receive, who, given, client)
        await respond(send, 200, _JSON.encode(answer).encode(), [])
        return None

    async def run(
        self, scope: Scope, receive: Receive, who: Principal, given: Any, client: str
    ) -> dict[str, Any]:
        raise NotImplementedError


class Claims(WorkEndpoint):
    model = ClaimRequest

    async def run(
        self, scope: Scope, receive: Receive, who: Principal, given: Any, client: str
    ) -> dict[str, Any]:
        # A long poll notices a client gone while it waits: Starlette's check of it.
        gone = Request(scope, receive).is_disconnected
        return await claimed(scope["app"].state.jobqueue, who, given, client, gone)


class Outcomes(WorkEndpoint):
    model = OutcomesRequest

    async def run(
        self, scope: Scope, receive: Receive, who: Principal, given: Any, client: str
    ) -> dict[str, Any]:
        return await applied(scope["app"].state.jobqueue, who, given)
