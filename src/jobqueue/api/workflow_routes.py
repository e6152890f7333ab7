"""The workflow endpoints: create one whole, read every node's state, cancel it."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Body, HTTPException, Path, Request
from pydantic import BaseModel

from jobqueue.api.errors import field_error
from jobqueue.api.new_jobs import check, known, problems_status, queue_of
from jobqueue.api.responses import (
    BODY,
    ENQUEUE_UNAVAILABLE,
    INVALID,
    UNAVAILABLE,
    Responses,
    declare,
)
from jobqueue.api.schemas import Problem, TraceParent, TraceState
from jobqueue.api.state import jobqueue
from jobqueue.audit import Actor
from jobqueue.auth import access
from jobqueue.auth.authenticator import require
from jobqueue.model.job import Job
from jobqueue.model.tokens import Principal, Scope
from jobqueue.workflows.model import Workflow, WorkflowError
from jobqueue.workflows.schema import NewWorkflow

router = APIRouter()

WorkflowId = Annotated[int, Path(ge=1, le=2**63 - 1, description="The workflow's id.")]
NOT_FOUND: Responses = {404: {"description": "No such workflow", "model": Problem}}


class CreatedJob(BaseModel):
    ref: str
    id: int


class WorkflowCreated(BaseModel):
    id: int
    jobs: list[CreatedJob]
    """Each ref's job id, in the order given."""


class WorkflowNode(BaseModel):
    ref: str
    depends_on: list[str]
    job: Job


class WorkflowOut(BaseModel):
    id: int
    name: str | None
    created_at: datetime
    status: str
    """running while a job is blocked, pending or running; else completed if every job
    did, failed if one failed, cancelled otherwise."""
    jobs: list[WorkflowNode]


@router.post(
    "/workflows",
    status_code=201,
    response_model=WorkflowCreated,
    summary="Create a workflow, all or none",
    responses=declare(
        BODY,
        INVALID,
        ENQUEUE_UNAVAILABLE,
        {
            403: {"description": "A job out of the token's queues or types", "model": Problem},
            413: {"description": "A payload over JOBQUEUE_MAX_PAYLOAD_BYTES"},
            422: {
                "description": "Invalid jobs, an unknown ref or a cycle, each named by "
                "index (jobs.3.depends_on); nothing is stored"
            },
        },
    ),
)
async def create_workflow(
    request: Request,
    who: Annotated[Principal, require(Scope.ENQUEUE)],
    spec: Annotated[NewWorkflow, Body()],
    traceparent: TraceParent = None,
    tracestate: TraceState = None,
) -> WorkflowCreated:
    """Store every job in one transaction. Each job takes the fields of `POST /jobs`,
    a `ref` and the refs it `depends_on`; a job with parents waits `blocked` until they
    have ended (docs/workflows.md)."""
    jq = jobqueue(request)
    check_types = request.app.state.check_types
    types = await known(jq, spec.jobs, check_types)
    problems = [
        problem
        for i, new in enumerate(spec.jobs)
        # A workflow job may have a unique key, unlike a batch's (check refuses those).
        for problem in check(
            jq,
            check_types,
            new.model_copy(update={"unique_key": None}),
            ["body", "jobs", i],
            types,
        )
    ]
    if problems:
        raise HTTPException(problems_status(problems), detail=problems)
    for i, new in enumerate(spec.jobs):
        refused = access.may_enqueue(who, queue=queue_of(jq, new), type=new.type, field=f"jobs.{i}")
        if refused is not None:
            raise refused
    try:
        created = await jq.enqueue_workflow(
            spec, headers={"traceparent": traceparent, "tracestate": tracestate}
        )
    except WorkflowError as exc:
        raise HTTPException(
            422, detail=[field_error(["body", *exc.loc], exc.message, "invalid_workflow")]
        ) from None
    return WorkflowCreated(
        id=created.id, jobs=[CreatedJob(ref=ref, id=id) for ref, id in created.jobs.items()]
    )


@router.get(
    "/workflows/{id}",
    response_model=WorkflowOut,
    summary="Get a workflow and every node's state",
    responses=declare(NOT_FOUND, INVALID, UNAVAILABLE),
)
async def get_workflow(
    request: Request, who: Annotated[Principal, require(Scope.READ)], id: WorkflowId
) -> WorkflowOut:
    """The workflow's state and each job of it as `GET /jobs/{id}` shows it, with the
    refs it waits for."""
    return shown(await jobqueue(request).get_workflow(id), who, id)


@router.post(
    "/workflows/{id}/cancel",
    response_model=WorkflowOut,
    summary="Cancel a workflow",
    responses=declare(NOT_FOUND, INVALID, UNAVAILABLE),
)
async def cancel_workflow(
    request: Request, who: Annotated[Principal, require(Scope.CONTROL)], id: WorkflowId
) -> WorkflowOut:
    """Every job not ended yet is cancelled: blocked and pending ones at once, running
    ones asked to stop (their workers end them cancelled within moments)."""
    jq = jobqueue(request)
    if who.restricted:
        shown(await jq.get_workflow(id), who, id)
    return shown(await jq.cancel_workflow(id, by=Actor.of(who)), who, id)


def shown(workflow: Workflow | None, who: Principal, id: int) -> WorkflowOut:
    """The workflow as ``who`` may see it: not found unless every job is in reach."""
    if workflow is None or not all(
        who.allows(queue=n.job.queue, type=n.job.type) for n in workflow.jobs
    ):
        raise HTTPException(404, detail=f"workflow {id} not found")
    return WorkflowOut(
        id=workflow.id,
        name=workflow.name,
        created_at=workflow.created_at,
        status=workflow.status,
        jobs=[
            WorkflowNode(ref=n.ref, depends_on=n.depends_on, job=access.shown(n.job, who))
            for n in workflow.jobs
        ],
    )
