"""Error responses: always JSON, and every field error names its field.

    {"detail": [{"field": "max_attempts", "loc": ["body", "max_attempts"],
                 "msg": "Input should be greater than or equal to 1",
                 "type": "greater_than_equal"}]}

Errors about no single field (404, 409, 410, 503) carry ``detail`` as one string; a 409
also gives the job's current ``status``, a 410 the ``job_id`` an Idempotency-Key was
used for (api/schemas.py has each body), and an enqueue's 503 whether its jobs may have
been stored (``"stored": false``: retry; ``"stored": "unknown"``: retry with the same
``Idempotency-Key`` or ``unique_key``, which cannot store it twice).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from jobqueue.auth.authenticator import TokensUnavailable
from jobqueue.db.pool import UNAVAILABLE_ERRORS, is_unavailable
from jobqueue.enqueue.idempotency import IdempotentJobGone
from jobqueue.http_workers.service import LeaseLost
from jobqueue.model.errors import EnqueueError, EnqueueFailed
from jobqueue.model.job import JobNotFound, JobStateError
from jobqueue.model.schedules import ScheduleConflict, ScheduleNotFound


def field_error(loc: Sequence[str | int], msg: str, type: str) -> dict[str, Any]:
    # "field" is the location without its "body"/"path"/"query" prefix.
    field = ".".join(str(p) for p in loc[1:]) or str(loc[0])
    return {"field": field, "loc": list(loc), "msg": msg, "type": type}


def field_errors(status: int, errors: list[dict[str, Any]]) -> JSONResponse:
    return JSONResponse({"detail": errors}, status_code=status)


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        # A JSON syntax error is located by character offset, not by field.
        field_error(["body"] if e["type"] == "json_invalid" else e["loc"], _message(e), e["type"])
        for e in exc.errors()
    ]
    malformed = any(e["type"] == "json_invalid" for e in exc.errors())
    return field_errors(400 if malformed else 422, errors)


def _message(error: dict[str, Any]) -> str:
    if error["type"] == "json_invalid":
        reason = error.get("ctx", {}).get("error", "cannot be parsed")
        return f"malformed JSON at character {error['loc'][-1]}: {reason}"
    if error["type"] == "extra_forbidden":
        return "unknown field"
    # A validator's own ValueError says what is wrong; pydantic's prefix adds nothing.
    return str(error["msg"]).removeprefix("Value error, ")


async def database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    if not is_unavailable(exc):
        raise exc  # a bug: a 500, with its traceback in the log
    return JSONResponse(
        {"detail": "database unavailable; retry later"},
        status_code=503,
        headers={"Retry-After": "1"},
    )


async def enqueue_unavailable(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, EnqueueError)
    detail = (
        "database unavailable; nothing stored, retry later"
        if isinstance(exc, EnqueueFailed)
        else "database connection lost after the job was sent: it may or may not be "
        "stored; retry with the same Idempotency-Key to be sure"
    )
    return JSONResponse(
        {"detail": detail, "stored": exc.stored}, status_code=503, headers={"Retry-After": "1"}
    )


async def tokens_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """Nothing was done: the request stopped at its token, before any query of its own."""
    body: dict[str, Any] = {"detail": "database unavailable; retry later"}
    if request.method == "POST":
        body = {"detail": "database unavailable; nothing stored, retry later", "stored": False}
    return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})


async def idempotent_job_gone(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, IdempotentJobGone)
    return JSONResponse({"detail": str(exc), "job_id": exc.job_id}, status_code=410)


async def lease_lost(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=409)


async def job_not_found(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=404)


async def schedule_not_found(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=404)


async def schedule_conflict(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=409)


async def job_state_conflict(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, JobStateError)
    return JSONResponse({"detail": str(exc), "status": exc.job.status}, status_code=409)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and isinstance(exc.detail, str):
        # FastAPI's own, for a body it cannot even decode (not UTF-8): a malformed
        # body like any other, named as the JSON syntax errors are.
        return field_errors(400, [field_error(["body"], f"malformed body: {exc.detail}",
                                              "body_invalid")])  # fmt: skip
    if exc.status_code == 403:  # in the audit log, at most a row a minute (api/refusals.py)
        await request.app.state.refusals.record(request, exc)
    return await http_exception_handler(request, exc)


def install(app: FastAPI) -> None:
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(JobNotFound, job_not_found)
    app.add_exception_handler(LeaseLost, lease_lost)
    app.add_exception_handler(IdempotentJobGone, idempotent_job_gone)
    app.add_exception_handler(JobStateError, job_state_conflict)
    app.add_exception_handler(ScheduleNotFound, schedule_not_found)
    app.add_exception_handler(ScheduleConflict, schedule_conflict)
    app.add_exception_handler(EnqueueError, enqueue_unavailable)
    app.add_exception_handler(TokensUnavailable, tokens_unavailable)
    for exc in UNAVAILABLE_ERRORS:
        app.add_exception_handler(exc, database_unavailable)
