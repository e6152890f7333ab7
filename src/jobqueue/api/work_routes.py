"""The HTTP worker protocol (docs/http-workers.md): claim jobs with leases, renew a
lease, complete or fail its job. Every route takes the scope ``jobs:work``; a token
restricted to queues or types claims only within them. A write whose lease no longer
holds its job is a 409 and changes nothing (jobqueue.http_workers)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Request
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from jobqueue.api.responses import (
    BODY,
    INVALID,
    JOB_NOT_FOUND,
    UNAVAILABLE,
    Responses,
    declare,
)
from jobqueue.api.schemas import JobId, Problem
from jobqueue.api.state import jobqueue
from jobqueue.auth import access
from jobqueue.auth.authenticator import require
from jobqueue.http_workers.leases import WORKER_NAME, Lease, worker_id
from jobqueue.http_workers.service import ClaimOrder
from jobqueue.model import fields
from jobqueue.model.tokens import Principal, Scope

router = APIRouter()

MAX_CLAIM = 100  # jobs in one claim
MAX_WAIT_SECONDS = 60.0  # a long poll's wait; under most proxies' idle timeouts
MIN_LEASE_SECONDS, MAX_LEASE_SECONDS = 1.0, 3600.0

LEASE_LOST: Responses = {
    409: {"description": "The lease no longer holds the job; nothing changed", "model": Problem}
}


def _lease(text: str) -> Lease:
    lease = Lease.parse(text)
    if lease is None:
        raise ValueError("not a lease (give the `lease` a claim answered)")
    return lease


def _a_lease(text: str) -> str:
    _lease(text)
    return text


LeaseText = Annotated[str, StringConstraints(max_length=200), AfterValidator(_a_lease)]
WorkerName = Annotated[str, StringConstraints(pattern=f"^{WORKER_NAME.pattern}$")]
QueueNameField = Annotated[str, StringConstraints(pattern=fields.QUEUE_PATTERN)]
TypeName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=fields.TYPE_MAX_LENGTH),
    AfterValidator(fields.storable),
]
LeaseSeconds = Annotated[float, Field(ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS)]
StorableJson = Annotated[Any, AfterValidator(fields.storable_json)]


class ClaimRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    worker: WorkerName = Field(description="The worker's name, as GET /workers shows it.")
    queues: list[QueueNameField] = Field(
        default_factory=lambda: ["default"], min_length=1, max_length=100,
        description="The queues to claim from, in this order.",
    )  # fmt: skip
    types: list[TypeName] | None = Field(
        default=None, min_length=1, max_length=1000,
        description="Only jobs of these types (the types this worker has handlers for); "
        "null: of every type.",
    )  # fmt: skip
    max: int = Field(default=1, ge=1, le=MAX_CLAIM, description="At most this many jobs.")
    wait_seconds: float = Field(
        default=0, ge=0, le=MAX_WAIT_SECONDS,
        description="With nothing due, wait up to this long for a job (a long poll).",
    )  # fmt: skip
    lease_seconds: LeaseSeconds | None = Field(
        default=None,
        description="How long each job is held without a heartbeat; default "
        "JOBQUEUE_LEASE_SECONDS.",
    )


class LeasedJob(BaseModel):
    id: int
    type: str
    queue: str
    payload: dict[str, Any]
    attempt: int
    max_attempts: int
    lease: str = Field(description="Name it in every write about this job.")
    lease_expires_at: datetime
    trace_id: str | None
    parent_results: dict[str, Any] | None = Field(
        description="A workflow job's parents' results by their refs; null outside workflows."
    )


class ClaimAnswer(BaseModel):
    jobs: list[LeasedJob]


class ProgressIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fraction: float | None = Field(default=None, ge=0, le=1)
    message: (
        Annotated[str, StringConstraints(max_length=1000), AfterValidator(fields.storable)] | None
    ) = None


class HeartbeatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lease: LeaseText
    lease_seconds: LeaseSeconds | None = Field(
        default=None, description="Renew for this long; default JOBQUEUE_LEASE_SECONDS."
    )
    progress: ProgressIn | None = None


class HeartbeatAnswer(BaseModel):
    lease_expires_at: datetime
    cancel_requested: bool = Field(description="The job was asked to stop: end it soon.")


class CompleteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lease: LeaseText
    result: StorableJson = Field(default=None, description="Any JSON value, or null.")


class ErrorIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Annotated[
        str, StringConstraints(min_length=1, max_length=200), AfterValidator(fields.storable)
    ]
    message: Annotated[str, StringConstraints(max_length=4000), AfterValidator(fields.storable)] = (
        ""
    )
    traceback: (
        Annotated[str, StringConstraints(max_length=100_000), AfterValidator(fields.storable)]
        | None
    ) = None


class FailRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lease: LeaseText
    error: ErrorIn
    retry_in_seconds: Annotated[float, Field(ge=0, le=fields.MAX_DELAY_SECONDS)] | None = Field(
        default=None, description="Retry after this long; null: the default backoff."
    )
    discard: bool = Field(default=False, description="Fail for good, attempts left or not.")


class Outcome(BaseModel):
    id: int
    status: str = Field(
        description="`completed`; or after a failure `pending` (retried) or `failed`."
    )
    retry_in_seconds: float | None = None


@router.post(
    "/claims",
    response_model=ClaimAnswer,
    summary="Claim jobs, each with a lease",
    responses=declare(BODY, INVALID, UNAVAILABLE),
)
async def claim(
    request: Request,
    who: Annotated[Principal, require(Scope.WORK)],
    order: Annotated[ClaimRequest, Body()],
) -> ClaimAnswer:
    """Up to `max` due jobs of the `queues` (and `types`), best first, each held for
    `lease_seconds`: with nothing due, the answer waits up to `wait_seconds` for one,
    woken as soon as one is enqueued, then is an empty list. A job claimed for a client
    that went away meanwhile is handed back at once, its attempt not counted."""
    jq = jobqueue(request)
    for queue in order.queues:
        access.may_control_queue(who, queue)
    types = order.types
    if who.types is not None:
        if types is None:
            types = sorted(who.types)
        for name in types:
            if name not in who.types:
                raise access.Forbidden(f"this token may not use type {name!r}", f"type={name}")
    lease_seconds = order.lease_seconds or jq.settings.lease_seconds
    client = request.client.host if request.client else "unknown"
    claimed = await jq.http_workers.claim(
        ClaimOrder(
            worker=order.worker,
            worker_id=worker_id(who, order.worker),
            client=client,
            queues=order.queues,
            types=types,
            max=order.max,
            wait_seconds=order.wait_seconds,
            lease_seconds=lease_seconds,
        ),
        request.is_disconnected,
    )
    expires = datetime.now(UTC) + timedelta(seconds=lease_seconds)
    return ClaimAnswer(
        jobs=[
            LeasedJob(
                id=c.job.id,
                type=c.job.type,
                queue=c.job.queue,
                payload=c.job.payload,
                attempt=c.job.attempt,
                max_attempts=c.job.max_attempts,
                lease=str(c.lease),
                lease_expires_at=expires,
                trace_id=_trace_id(c.job.trace),
                parent_results=None
                if c.job.workflow_id is None
                else {p.ref: p.result for p in c.parent_results},
            )
            for c in claimed
        ]
    )


@router.post(
    "/jobs/{job_id}/heartbeat",
    response_model=HeartbeatAnswer,
    summary="Renew a job's lease",
    responses=declare(BODY, INVALID, LEASE_LOST, UNAVAILABLE),
)
async def heartbeat(
    request: Request,
    who: Annotated[Principal, require(Scope.WORK)],
    job_id: JobId,
    beat: Annotated[HeartbeatRequest, Body()],
) -> HeartbeatAnswer:
    """The lease extended, and whether the job was asked to stop (`cancel_requested`):
    a worker that sees it should end the job soon. `progress` is shown with the job."""
    jq = jobqueue(request)
    lease = _leased(beat.lease, job_id)
    lease_seconds = beat.lease_seconds or jq.settings.lease_seconds
    renewed = await jq.http_workers.heartbeat(
        lease,
        worker_id(who, lease.worker),
        lease_seconds,
        None if beat.progress is None else (beat.progress.fraction, beat.progress.message),
    )
    return HeartbeatAnswer(
        lease_expires_at=datetime.now(UTC) + timedelta(seconds=lease_seconds),
        cancel_requested=renewed.cancel_requested,
    )


@router.post(
    "/jobs/{job_id}/complete",
    response_model=Outcome,
    summary="Complete a leased job",
    responses=declare(BODY, INVALID, LEASE_LOST, UNAVAILABLE),
)
async def complete(
    request: Request,
    who: Annotated[Principal, require(Scope.WORK)],
    job_id: JobId,
    done: Annotated[CompleteRequest, Body()],
) -> Outcome:
    """The job completed, with its `result`, which `GET /jobs/{id}` and `wait` show."""
    lease = _leased(done.lease, job_id)
    await jobqueue(request).http_workers.complete(lease, worker_id(who, lease.worker), done.result)
    return Outcome(id=job_id, status="completed")


@router.post(
    "/jobs/{job_id}/fail",
    response_model=Outcome,
    summary="Fail a leased job's attempt",
    responses=declare(BODY, INVALID, LEASE_LOST, JOB_NOT_FOUND, UNAVAILABLE),
)
async def fail(
    request: Request,
    who: Annotated[Principal, require(Scope.WORK)],
    job_id: JobId,
    failed: Annotated[FailRequest, Body()],
) -> Outcome:
    """The attempt failed, with its error: the job is retried as its retry policy says
    (exponential backoff from RETRY_DELAY_SECONDS) while attempts are left, after
    `retry_in_seconds` if given; with none left, or with `discard`, it fails for good."""
    lease = _leased(failed.lease, job_id)
    error = failed.error
    delay = await jobqueue(request).http_workers.fail(
        lease,
        worker_id(who, lease.worker),
        f"{error.type}: {error.message}" if error.message else error.type,
        error.traceback,
        failed.retry_in_seconds,
        failed.discard,
    )
    status = "failed" if delay is None else "pending"
    return Outcome(id=job_id, status=status, retry_in_seconds=delay)


def _leased(text: str, job_id: int) -> Lease:
    lease = _lease(text)
    if lease.job_id != job_id:
        raise HTTPException(
            422,
            detail=[
                {"field": "lease", "loc": ["body", "lease"],
                 "msg": f"the lease is job {lease.job_id}'s, not job {job_id}'s",
                 "type": "lease_mismatch"}
            ],
        )  # fmt: skip
    return lease


def _trace_id(trace: dict[str, str] | None) -> str | None:
    parent = (trace or {}).get("traceparent")
    return parent[3:35] if isinstance(parent, str) and len(parent) >= 35 else None
