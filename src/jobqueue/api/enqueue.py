"""POST /jobs and POST /jobs/batch as api/lean.py's middleware serves them: the
Idempotency-Key and trace headers read, the body validated as NewJob or NewJobs, and
the jobs stored through the same functions as the FastAPI routes
(``new_jobs.enqueue_one``, ``new_jobs.enqueue_batch``). A malformed
``Idempotency-Key`` is handed on to the FastAPI route, which answers its 422.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Receive, Scope, Send

from jobqueue.api.lean import client_of, headers_of, parse_json, read_body, respond, text
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


class Enqueue:
    """The endpoint of POST /jobs (``model`` NewJob) or POST /jobs/batch (NewJobs)."""

    def __init__(self, route: Any, model: type[NewJob] | type[NewJobs]) -> None:
        self.route = route
        self.model = model

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """Answer the request, or return its body for the rest of the application."""
        headers = headers_of(scope, READ_HEADERS)
        body = await read_body(receive)
        if body is None:
            return None  # the client went away
        parsed = parse_json(self.model, headers.get(b"content-type"), body)
        key = text(headers.get(b"idempotency-key"))
        if parsed is None or (key is not None and len(key) not in IDEMPOTENCY_KEY_LENGTH):
            return body
        scope["route"] = self.route
        state = scope["app"].state
        who = await state.auth.authenticate(
            text(headers.get(b"authorization")), client_of(scope), TokenScope.ENQUEUE
        )
        trace = {
            "traceparent": text(headers.get(b"traceparent")),
            "tracestate": text(headers.get(b"tracestate")),
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
