"""The HTTP worker protocol (docs/http-workers.md): claim jobs with leases, renew a
lease, complete or fail its job. Every route takes the scope ``jobs:work``; a token
restricted to queues or types claims only within them. A write whose lease no longer
holds its job is a 409 and changes nothing (jobqueue.http_workers)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Request

from jobqueue.api.errors import field_error
from jobqueue.api.responses import (
    BODY,
    INVALID,
    UNAVAILABLE,
    Responses,
    declare,
)
from jobqueue.api.schemas import JobId, Problem
from jobqueue.api.state import jobqueue
from jobqueue.api.work_schemas import (
    ClaimAnswer,
    ClaimRequest,
    CompleteRequest,
    FailRequest,
    HeartbeatAnswer,
    HeartbeatRequest,
    HeartbeatsAnswer,
    HeartbeatsRequest,
    LeaseRenewal,
    LogsAnswer,
    LogsRequest,
    Outcome,
    OutcomeIn,
    OutcomesAnswer,
    OutcomesRequest,
    ReleaseRequest,
    SnoozeRequest,
)
from jobqueue.app import JobQueue
from jobqueue.auth import access
from jobqueue.auth.authenticator import require
from jobqueue.http_workers.leases import Lease, worker_id
from jobqueue.http_workers.service import Claimed, ClaimOrder, Completion, Failed, Snoozed
from jobqueue.model.job import trace_id_of
from jobqueue.model.tokens import Principal, Scope

LEASE_LOST: Responses = {
    409: {"description": "The lease no longer holds the job; nothing changed", "model": Problem}
}

router = APIRouter()


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
) -> dict[str, Any]:
    """Up to `max` due jobs of the `queues` (and `types`), best first, each held for
    `lease_seconds`: with nothing due, the answer waits up to `wait_seconds` for one,
    woken as soon as one is enqueued, then is an empty list. A job claimed for a client
    that went away meanwhile is handed back at once, its attempt not counted. The
    `outcomes` it carries (as POST /outcomes takes them) are applied while a claim
    that does not wait (`wait_seconds` 0) is made, and before one that may, and
    answered in `outcomes`: one request per batch for a worker's outcomes and its next
    claim. If they cannot be applied, the claim's jobs are handed back before the error
    is answered."""
    client = request.client.host if request.client else "unknown"
    return await claimed(jobqueue(request), who, order, client, request.is_disconnected)


async def claimed(
    jq: JobQueue,
    who: Principal,
    order: ClaimRequest,
    client: str,
    gone: Callable[[], Awaitable[bool]],
) -> dict[str, Any]:
    """POST /claims once its request is parsed and its token known (here, and in
    api/lean_work.py): ``gone`` says whether the client went away. The answer is
    ClaimAnswer's JSON as plain values: validating its values again, all from the
    database or the validated request, as 50 LeasedJob models was the largest part of
    the API's own work per claim (bench/budget.py http_work). FastAPI's route still
    validates it against ClaimAnswer."""
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
    claim = ClaimOrder(
        worker=order.worker,
        worker_id=worker_id(who, order.worker),
        client=client,
        queues=order.queues,
        types=types,
        max=order.max,
        wait_seconds=order.wait_seconds,
        lease_seconds=lease_seconds,
    )
    if not order.outcomes:
        reported, claimed = [], await jq.http_workers.claim(claim, gone)
    elif order.wait_seconds > 0:
        # A claim that may wait comes after its outcomes: outcomes that fail are then
        # answered at once, not when the wait ends (their answers wait for it anyway).
        reported = await apply_outcomes(jq, who, order.outcomes)
        claimed = await jq.http_workers.claim(claim, gone)
    else:
        reported, claimed = await _claimed_beside(jq, who, order.outcomes, claim, gone)
    expires = json_time(datetime.now(UTC) + timedelta(seconds=lease_seconds))
    return {
        "jobs": [
            {
                "id": c.job.id,
                "type": c.job.type,
                "queue": c.job.queue,
                "payload": c.job.payload,
                "attempt": c.job.attempt,
                "max_attempts": c.job.max_attempts,
                "lease": str(c.lease),
                "lease_expires_at": expires,
                "trace_id": trace_id_of(c.job.trace),
                "parent_results": None
                if c.job.workflow_id is None
                else {p.ref: p.result for p in c.parent_results},
                "tags": c.job.tags or [],
                "meta": c.job.meta,
            }
            for c in claimed
        ],
        "outcomes": reported,
    }


async def _claimed_beside(
    jq: JobQueue,
    who: Principal,
    outcomes: Sequence[OutcomeIn],
    claim: ClaimOrder,
    gone: Callable[[], Awaitable[bool]],
) -> tuple[list[dict[str, Any]], list[Claimed]]:
    """The outcomes' answers, and the claim (one that does not wait), made on its own
    connection while the outcomes are applied: one database round trip and commit per
    request instead of two in a row, which at a worker's concurrency of 50 was a
    quarter of each claim's turn. A job that the outcomes make claimable (a released
    workflow child, a freed concurrency slot) is left to the worker's next claim, which
    sees them: the answer is sent once both are done. If the outcomes fail, the claim's
    jobs are handed back before the error is answered. Sent again after a lost answer,
    an outcome is answered as applied and changes nothing."""
    claiming = asyncio.ensure_future(jq.http_workers.claim(claim, gone))
    try:
        reported = await apply_outcomes(jq, who, outcomes)
    except BaseException:
        await jq.http_workers.hand_back(claiming, claim.worker_id)
        raise
    return reported, await claiming


def json_time(when: datetime) -> str:
    """A UTC time as pydantic writes it in JSON: ISO 8601, "Z" for UTC."""
    return when.isoformat().replace("+00:00", "Z")


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
    workers = jobqueue(request).http_workers
    status = await workers.complete(lease, worker_id(who, lease.worker), done.result)
    return Outcome(id=job_id, status=status)


@router.post(
    "/jobs/{job_id}/fail",
    response_model=Outcome,
    summary="Fail a leased job's attempt",
    responses=declare(BODY, INVALID, LEASE_LOST, UNAVAILABLE),
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
    message = f"{error.type}: {error.message}" if error.message else error.type
    given = Failed(
        lease, worker_id(who, lease.worker), message, error.traceback,
        failed.retry_in_seconds, failed.discard,
    )  # fmt: skip
    status, delay = await jobqueue(request).http_workers.fail(given)
    return Outcome(id=job_id, status=status, retry_in_seconds=delay)


@router.post(
    "/jobs/{job_id}/snooze",
    response_model=Outcome,
    summary="Snooze a leased job: run it again later, the attempt not counted",
    responses=declare(BODY, INVALID, LEASE_LOST, UNAVAILABLE),
)
async def snooze(
    request: Request,
    who: Annotated[Principal, require(Scope.WORK)],
    job_id: JobId,
    given: Annotated[SnoozeRequest, Body()],
) -> Outcome:
    """The job cannot run yet: it is `pending` again, due after `seconds`, and its
    attempt is not counted for its retry policy. A job snoozed JOBQUEUE_MAX_SNOOZES
    times is `failed` instead, saying so; one asked to stop is `cancelled`."""
    lease = _leased(given.lease, job_id)
    status, delay = await jobqueue(request).http_workers.snooze(
        Snoozed(lease, worker_id(who, lease.worker), given.seconds)
    )
    return Outcome(id=job_id, status=status, retry_in_seconds=delay)


@router.post(
    "/jobs/{job_id}/release",
    response_model=Outcome,
    summary="Hand a leased job back, its attempt not counted",
    responses=declare(BODY, INVALID, LEASE_LOST, UNAVAILABLE),
)
async def release(
    request: Request,
    who: Annotated[Principal, require(Scope.WORK)],
    job_id: JobId,
    given: Annotated[ReleaseRequest, Body()],
) -> Outcome:
    """The job is pending again at once, its attempt not counted (or `cancelled`, if it
    was asked to stop): for a worker that stops before it could finish, as a Python
    worker does at shutdown."""
    lease = _leased(given.lease, job_id)
    status = await jobqueue(request).http_workers.release(lease, worker_id(who, lease.worker))
    return Outcome(id=job_id, status="cancelled" if status == "cancelled" else "pending")


@router.post(
    "/jobs/{job_id}/logs",
    response_model=LogsAnswer,
    summary="Add lines to a leased job's log",
    responses=declare(BODY, INVALID, LEASE_LOST, UNAVAILABLE),
)
async def logs(
    request: Request,
    who: Annotated[Principal, require(Scope.WORK)],
    job_id: JobId,
    given: Annotated[LogsRequest, Body()],
) -> LogsAnswer:
    """The lines kept with the attempt, each stamped with the time it arrived, as a
    Python handler's `ctx.log` lines are (`GET /jobs/{id}/attempts`, `jobqueue jobs
    logs`), up to JOBQUEUE_JOB_LOG_BYTES an attempt."""
    lease = _leased(given.lease, job_id)
    workers = jobqueue(request).http_workers
    truncated = await workers.log(lease, worker_id(who, lease.worker), given.lines)
    return LogsAnswer(truncated=truncated)


def _leased(text: str, job_id: int) -> Lease:
    lease = _parsed(text)
    if lease.job_id != job_id:
        message = f"the lease is job {lease.job_id}'s, not job {job_id}'s"
        raise HTTPException(422, detail=[field_error(["body", "lease"], message, "lease_mismatch")])
    return lease


def _parsed(text: str) -> Lease:
    return Lease.of(text)  # the request's model checked it (LeaseText)


@router.post(
    "/heartbeats",
    response_model=HeartbeatsAnswer,
    summary="Renew many leases",
    responses=declare(BODY, INVALID, UNAVAILABLE),
)
async def heartbeats(
    request: Request,
    who: Annotated[Principal, require(Scope.WORK)],
    beats: Annotated[HeartbeatsRequest, Body()],
) -> HeartbeatsAnswer:
    """Each lease renewed, in one statement per worker: each answer says whether it was
    (`ok`; false: the lease lost its job, and nothing changed) and whether its job was
    asked to stop. A worker renews all its running jobs with one call."""
    jq = jobqueue(request)
    lease_seconds = beats.lease_seconds or jq.settings.lease_seconds
    leases = [_parsed(text) for text in beats.leases]
    renewed = await jq.http_workers.heartbeats(
        [(lease, worker_id(who, lease.worker)) for lease in leases], lease_seconds
    )
    expires = datetime.now(UTC) + timedelta(seconds=lease_seconds)
    return HeartbeatsAnswer(
        leases=[
            LeaseRenewal(lease=text, ok=False, detail=LOST)
            if (renewal := renewed[lease]) is None
            else LeaseRenewal(
                lease=text,
                ok=True,
                lease_expires_at=expires,
                cancel_requested=renewal.cancel_requested,
            )
            for text, lease in zip(beats.leases, leases, strict=True)
        ]
    )


@router.post(
    "/outcomes",
    response_model=OutcomesAnswer,
    summary="Complete or fail many leased jobs",
    responses=declare(BODY, INVALID, UNAVAILABLE),
)
async def outcomes(
    request: Request,
    who: Annotated[Principal, require(Scope.WORK)],
    given: Annotated[OutcomesRequest, Body()],
) -> dict[str, Any]:
    """Each outcome applied as `complete` (a `result`) or `fail` (an `error`) would
    apply it, the completions in one statement per worker: those whose lease lost its
    job are refused (`ok` false) and change nothing, the rest are applied."""
    return await applied(jobqueue(request), who, given)


async def applied(jq: JobQueue, who: Principal, given: OutcomesRequest) -> dict[str, Any]:
    """POST /outcomes once its request is parsed and its token known (here, and in
    api/lean_work.py): OutcomesAnswer's JSON as plain values, as a claim's answer is."""
    return {"outcomes": await apply_outcomes(jq, who, given.outcomes)}


async def apply_outcomes(
    jq: JobQueue, who: Principal, outcomes: Sequence[OutcomeIn]
) -> list[dict[str, Any]]:
    """Each outcome applied, fenced by its lease: POST /outcomes, and those a claim
    carries; each answered as OutcomeApplied's JSON."""
    items: list[Completion | Failed | Snoozed] = []
    for o in outcomes:
        lease = _parsed(o.lease)
        who_id = worker_id(who, lease.worker)
        if o.snooze_seconds is not None:
            items.append(Snoozed(lease, who_id, o.snooze_seconds))
        elif o.error is None:
            items.append(Completion(lease, who_id, o.result))
        else:
            error = f"{o.error.type}: {o.error.message}" if o.error.message else o.error.type
            items.append(
                Failed(lease, who_id, error, o.error.traceback, o.retry_in_seconds, o.discard)
            )
    ended = await jq.http_workers.outcomes(items)
    answers = []
    for o, item in zip(outcomes, items, strict=True):
        status, delay = ended[item.lease]
        answers.append(
            {"lease": o.lease, "ok": status is not None, "id": item.lease.job_id,
             "status": status, "retry_in_seconds": delay,
             "detail": LOST if status is None else None}
        )  # fmt: skip
    return answers


LOST = "this lease no longer holds its job; nothing changed"
