"""Job edits (docs/job-edits.md): ``PATCH /jobs/{id}`` changes a job that has not
started, ``POST /jobs/{id}/run-now`` makes it due now, ``DELETE /jobs/{id}`` deletes
one that is not running. Each takes ``jobs:control``, and is audited
(jobqueue.job_edits)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from jobqueue.api.errors import field_error
from jobqueue.api.job_routes import job_response
from jobqueue.api.new_jobs import check, known
from jobqueue.api.responses import BODY, INVALID, JOB_NOT_FOUND, UNAVAILABLE, conflict, declare
from jobqueue.api.schemas import JobId, Problem
from jobqueue.api.state import jobqueue
from jobqueue.audit import Actor
from jobqueue.auth import access
from jobqueue.auth.authenticator import require
from jobqueue.enqueue.new_job import Int32, Meta, NewJob, Payload, QueueName, Seconds, Tags
from jobqueue.job_edits import EDITABLE, WorkflowJobError
from jobqueue.model import fields
from jobqueue.model.job import Job
from jobqueue.model.tokens import Principal, Scope

router = APIRouter()


class JobPatch(BaseModel):
    """The fields to change; one left out is kept."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"delay_seconds": 3600}, {"priority": -5}, {"payload": {"to": "b@x"}}]
        },
    )

    run_at: AwareDatetime | None = Field(default=None, description="Do not start before this.")
    delay_seconds: Seconds | None = Field(
        default=None, description="Do not start before this many seconds from now."
    )
    priority: Int32 | None = None
    queue: QueueName | None = None
    max_attempts: Annotated[int, Field(ge=1, le=fields.MAX_ATTEMPTS_LIMIT)] | None = None
    payload: Payload | None = Field(
        default=None, description="Checked against the job's type, as at enqueue."
    )
    tags: Tags | None = Field(default=None, description="Its tags, all of them; [] for none.")
    meta: Meta | None = Field(
        default=None, description="Its metadata, the whole object; {} for none."
    )


@router.patch(
    "/jobs/{id}",
    response_model=Job,
    summary="Change a job that has not started",
    responses=declare(
        BODY,
        INVALID,
        UNAVAILABLE,
        JOB_NOT_FOUND,
        conflict("The job is running or ended: only a pending one can be changed"),
        {403: {"description": "A queue out of the token's reach", "model": Problem}},
    ),
)
async def update_job(
    request: Request,
    who: Annotated[Principal, require(Scope.CONTROL)],
    id: JobId,
    patch: JobPatch,
) -> Response:
    """A pending job (due, scheduled or waiting to retry) changed: its run time, its
    priority, its queue, its attempts, its payload. A running or ended job is a 409
    naming its state; so is one a worker took between a read and this change."""
    given = {f: getattr(patch, f) for f in EDITABLE if f in patch.model_fields_set}
    problems = [
        field_error(["body", f], "may not be null", "null") for f, v in given.items() if v is None
    ]
    if not given:
        problems.append(field_error(["body"], "name at least one field to change", "missing"))
    if given.get("run_at") is not None and given.get("delay_seconds") is not None:
        problems.append(field_error(["body", "run_at"], "give run_at or delay_seconds", "both"))
    jq = jobqueue(request)
    current = access.visible(await jq.get(id), who, id)
    if not problems and "payload" in given:
        new = NewJob(type=current.type, payload=given["payload"])
        problems += check(jq, False, new, ["body"], await known(jq, [new], False))
    if problems:
        raise HTTPException(422, detail=problems)
    if "queue" in given:
        refusal = access.may_enqueue(who, queue=given["queue"], type=current.type, field="body")
        if refusal is not None:
            raise refusal
    job = await jq.update_job(id, by=Actor.of(who), **given)
    return job_response(access.shown(job, who))


@router.post(
    "/jobs/{id}/run-now",
    response_model=Job,
    summary="Make a scheduled or retrying job due now",
    responses=declare(
        INVALID,
        UNAVAILABLE,
        JOB_NOT_FOUND,
        conflict("The job is running or ended"),
    ),
)
async def run_now(
    request: Request, who: Annotated[Principal, require(Scope.CONTROL)], id: JobId
) -> Response:
    """Its `run_at` becomes now, and a worker takes it at once; a job due already is
    answered as it is."""
    jq = jobqueue(request)
    access.visible(await jq.get(id), who, id)
    return job_response(access.shown(await jq.run_now(id, by=Actor.of(who)), who))


@router.delete(
    "/jobs/{id}",
    status_code=204,
    summary="Delete a job that is not running",
    responses=declare(
        INVALID,
        UNAVAILABLE,
        JOB_NOT_FOUND,
        conflict("The job is running (cancel it first), or of a workflow"),
    ),
)
async def delete_job(
    request: Request, who: Annotated[Principal, require(Scope.CONTROL)], id: JobId
) -> Response:
    """The job and its history are gone; a unique key it held is free. A running job is
    a 409: cancel it first. A workflow's job is a 409 too: cancel the workflow."""
    jq = jobqueue(request)
    access.visible(await jq.get(id), who, id)
    try:
        await jq.delete_job(id, by=Actor.of(who))
    except WorkflowJobError as exc:
        return JSONResponse({"detail": str(exc), "status": exc.job.status}, status_code=409)
    return Response(status_code=204)
