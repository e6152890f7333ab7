"""Signals (docs/durable.md#signals): ``POST /signals`` sends a durable job a signal,
which its handler's ``ctx.wait_for_signal(name)`` returns. It takes ``jobs:signal``,
and each one is audited, refusals included (jobqueue.durable.signals)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from jobqueue.api.responses import BODY, INVALID, JOB_NOT_FOUND, UNAVAILABLE, conflict, declare
from jobqueue.api.schemas import JobId
from jobqueue.api.state import jobqueue
from jobqueue.audit import Actor
from jobqueue.auth import access
from jobqueue.auth.authenticator import require
from jobqueue.durable.signals import MAX_NAME, SignalRefused
from jobqueue.model import fields
from jobqueue.model.job import JobNotFound
from jobqueue.model.tokens import Principal, Scope

router = APIRouter()


class NewSignal(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"name": "approved", "job_id": 42, "payload": {"by": "ana"}}]
        },
    )

    name: Annotated[
        str, Field(min_length=1, max_length=MAX_NAME), AfterValidator(fields.storable)
    ] = Field(description="The name the handler waits for: ctx.wait_for_signal(name).")
    job_id: JobId = Field(description="The job to signal.")
    payload: Any = Field(
        default=None, description="What ctx.wait_for_signal returns: any JSON value."
    )


class SignalSent(BaseModel):
    id: int
    """The signal's id."""
    job_id: int
    name: str


@router.post(
    "/signals",
    status_code=201,
    response_model=SignalSent,
    summary="Send a durable job a signal",
    responses=declare(
        BODY,
        INVALID,
        UNAVAILABLE,
        JOB_NOT_FOUND,
        conflict("The job has ended: the signal was not kept"),
    ),
)
async def send_signal(
    request: Request, who: Annotated[Principal, require(Scope.SIGNAL)], signal: NewSignal
) -> JSONResponse:
    """Keeps the signal for the job: a handler waiting in `ctx.wait_for_signal(name)` is
    woken and gets its payload, and one that waits for it later gets it then. A job
    that has ended is a 409 naming its state. The payload is limited as a job's result
    is (`JOBQUEUE_MAX_RESULT_BYTES`)."""
    jq = jobqueue(request)
    access.visible(await jq.get(signal.job_id), who, signal.job_id)
    try:
        signal_id = await jq.signal(signal.job_id, signal.name, signal.payload, by=Actor.of(who))
    except SignalRefused as exc:
        if not exc.ended:
            raise JobNotFound(signal.job_id) from None
        return JSONResponse({"detail": str(exc), "status": exc.status}, status_code=409)
    sent = SignalSent(id=signal_id, job_id=signal.job_id, name=signal.name)
    return JSONResponse(sent.model_dump(), status_code=201)
