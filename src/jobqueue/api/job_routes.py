"""The jobs' endpoints: enqueue one or a batch, get one (long-polling with ``wait``),
list them, a job's attempts and their logs, retry or cancel one, and retry or cancel
many by filter. What storing a new job checks is in new_jobs.py."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Body, Header, HTTPException, Query, Request, Response

from jobqueue.api import idempotency_header
from jobqueue.api.new_jobs import enqueue_batch, enqueue_one
from jobqueue.api.responses import (
    BODY,
    ENQUEUE_UNAVAILABLE,
    INVALID,
    JOB_NOT_FOUND,
    UNAVAILABLE,
    conflict,
    declare,
)
from jobqueue.api.schemas import (
    AttemptList,
    BatchCreated,
    CancelFilter,
    Cancelled,
    JobGone,
    JobId,
    NewJobs,
    Retried,
    RetryFilter,
    TraceParent,
    TraceState,
)
from jobqueue.api.state import jobqueue
from jobqueue.app import JobQueue
from jobqueue.audit import Actor
from jobqueue.auth import access
from jobqueue.auth.authenticator import require
from jobqueue.encoding import to_json
from jobqueue.enqueue.new_job import NewJob
from jobqueue.model import fields
from jobqueue.model.job import FINAL_STATES, Job, JobStatus
from jobqueue.model.steps import JobDetail
from jobqueue.model.tokens import Principal, Scope

router = APIRouter()

# Longest long-poll of GET /jobs/{id}?wait=: an open request per waiting client; keep
# it under the idle timeout of the proxies in front.
MAX_WAIT_SECONDS = 300.0


@router.post(
    "/jobs",
    status_code=201,
    response_model=Job,
    summary="Enqueue a job",
    responses=declare(
        BODY,
        INVALID,
        ENQUEUE_UNAVAILABLE,
        {
            200: {
                "description": "Nothing stored: the job this request's Idempotency-Key "
                "stored before, or the pending or running job holding its unique key"
            },
            410: {
                "description": "The Idempotency-Key's job was deleted by retention",
                "model": JobGone,
            },
            413: {
                "description": "Payload over JOBQUEUE_MAX_PAYLOAD_BYTES, or body over "
                "JOBQUEUE_MAX_REQUEST_BYTES"
            },
            422: {
                "description": "Invalid field, unknown field, no handler for the type, "
                "or an Idempotency-Key used for another request"
            },
        },
    ),
)
async def create_job(
    request: Request,
    who: Annotated[Principal, require(Scope.ENQUEUE)],
    new: Annotated[NewJob, Body()],
    idempotency_key: Annotated[
        str | None,
        Header(
            alias=idempotency_header.HEADER,
            min_length=1,
            max_length=fields.UNIQUE_KEY_MAX_LENGTH + 2,
            description="For clients that retry a POST: a retry with the key of a request "
            "made within JOBQUEUE_IDEMPOTENCY_TTL gets the job that request stored (200), "
            'whatever its state, and stores nothing. A structured-field string, `"key"`, '
            "or a bare key; at most 255 characters of printable ASCII.",
            examples=['"8e03978e-40d5-43e8-bc93-6894a57f9324"'],
        ),
    ] = None,
    traceparent: TraceParent = None,
    tracestate: TraceState = None,
) -> Response:
    """Store a job (201, with `Location`) for a worker to run. A retry with the
    `Idempotency-Key` of an earlier request gets that request's job (200); the key
    with another body is a 422. A job whose `unique_key` is held by a pending or
    running job is not stored: the answer is that job, with 200. Every invalid field
    is a 422 naming it; nothing is stored."""
    # api/enqueue.py serves the requests it can parse without FastAPI, and hands the
    # others on to this route (see there).
    state = request.app.state
    trace = {"traceparent": traceparent, "tracestate": tracestate}
    job, created = await enqueue_one(
        state.jobqueue, who, new, check_types=state.check_types,
        idempotency_key=idempotency_key, trace=trace,
    )  # fmt: skip
    return job_response(
        access.shown(job, who), 201 if created else 200, {"Location": f"/jobs/{job.id}"}
    )


def job_response(job: Job, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    # The job was validated when it was built: serialise it once, without FastAPI
    # validating it again against the response model.
    return Response(to_json(job), status, headers, media_type="application/json")


@router.post(
    "/jobs/batch",
    status_code=201,
    response_model=BatchCreated,
    summary="Enqueue many jobs, all or none",
    responses=declare(
        BODY,
        INVALID,
        ENQUEUE_UNAVAILABLE,
        {
            413: {
                "description": "A payload over JOBQUEUE_MAX_PAYLOAD_BYTES, or body over "
                "JOBQUEUE_MAX_REQUEST_BYTES"
            },
            422: {
                "description": "Invalid jobs; each error names its job by index, e.g. jobs.3.type"
            },
        },
    ),
)
async def create_jobs(
    request: Request,
    who: Annotated[Principal, require(Scope.ENQUEUE)],
    batch: Annotated[NewJobs, Body()],
    traceparent: TraceParent = None,
    tracestate: TraceState = None,
) -> BatchCreated:
    """Store up to 10,000 jobs in one statement, all or none: one invalid job is a 422
    naming it by index (`jobs.3.type`), and nothing is stored. Workers are woken once."""
    state = request.app.state
    trace = {"traceparent": traceparent, "tracestate": tracestate}
    ids = await enqueue_batch(
        state.jobqueue, who, batch, check_types=state.check_types, trace=trace
    )
    return BatchCreated(ids=ids, count=len(ids))


@router.get(
    "/jobs/{id}",
    response_model=JobDetail,
    summary="Get a job",
    responses=declare(JOB_NOT_FOUND, INVALID, UNAVAILABLE),
)
async def get_job(
    request: Request,
    who: Annotated[Principal, require(Scope.READ)],
    id: JobId,
    wait: Annotated[
        float | None,
        Query(
            gt=0,
            le=MAX_WAIT_SECONDS,
            allow_inf_nan=False,
            description="Long-poll: answer as soon as the job is completed, failed or "
            "cancelled, or after this many seconds with the job as it is then.",
        ),
    ] = None,
) -> Response:
    """The job as stored now: state, attempts, last error, result, progress, times,
    and the steps its handler recorded (docs/durable.md). With `wait`, the answer
    waits (woken by the database, not by polling) until the job is final or `wait`
    seconds have passed; a server shutting down answers at once."""
    jq = jobqueue(request)
    job = access.visible(await jq.get(id), who, id)
    if wait is not None and job.status not in FINAL_STATES:
        job = await long_poll(jq, id, wait, request.app.state.stopping)
    return job_response(access.shown(await jq.detail(job), who))


async def long_poll(jq: JobQueue, id: int, seconds: float, stopping: asyncio.Event) -> Job:
    """The job once final, or as it is after ``seconds`` or when the server stops."""
    waiting = asyncio.ensure_future(jq.wait(id, timeout=seconds))
    stopped = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({waiting, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        waiting.cancel()
    if waiting.done() and not waiting.cancelled():
        if waiting.exception() is None:
            return waiting.result()
        if not isinstance(waiting.exception(), TimeoutError):
            raise waiting.exception()  # type: ignore[misc]  # JobNotFound, unavailable
    job = await jq.get(id)
    if job is None:
        raise HTTPException(404, detail=f"job {id} not found")
    return job


@router.post(
    "/jobs/{id}/retry",
    response_model=Job,
    summary="Retry a failed or cancelled job",
    responses=declare(
        JOB_NOT_FOUND,
        conflict("The job is pending, running or completed"),
        INVALID,
        UNAVAILABLE,
    ),
)
async def retry_job(
    request: Request, who: Annotated[Principal, require(Scope.CONTROL)], id: JobId
) -> Response:
    """The job is pending again at once, with fresh attempts; its attempt history stays.
    A pending or running job will run anyway, and a completed one must not run twice
    by accident: those are a 409 naming the state."""
    jq = jobqueue(request)
    if who.restricted:
        access.visible(await jq.get(id), who, id)
    return job_response(access.shown(await jq.retry(id, by=Actor.of(who)), who))


@router.post(
    "/jobs/{id}/cancel",
    response_model=Job,
    summary="Cancel a job",
    responses=declare(
        {202: {"description": "The job is running: its worker was asked to stop it", "model": Job}},
        JOB_NOT_FOUND,
        conflict("The job already completed or failed"),
        INVALID,
        UNAVAILABLE,
    ),
)
async def cancel_job(
    request: Request, who: Annotated[Principal, require(Scope.CONTROL)], id: JobId
) -> Response:
    """A pending job is `cancelled` at once (200). A running job is asked to stop (202,
    `cancel_requested_at` set): an async handler is cancelled, an isolated one killed,
    and a sync one sees `ctx.cancel_requested`; the job ends `cancelled`, never retried.
    Cancelling a cancelled job changes nothing (200)."""
    jq = jobqueue(request)
    if who.restricted:
        access.visible(await jq.get(id), who, id)
    job = await jq.cancel(id, by=Actor.of(who))
    return job_response(access.shown(job, who), 202 if job.status == JobStatus.RUNNING else 200)


@router.post(
    "/jobs/cancel",
    response_model=Cancelled,
    summary="Cancel jobs by filter",
    responses=declare(BODY, INVALID, UNAVAILABLE),
)
async def cancel_jobs(
    request: Request,
    who: Annotated[Principal, require(Scope.CONTROL)],
    where: Annotated[CancelFilter, Body()],
) -> Cancelled:
    """Every pending and running job that matches all the filters given, as for one job.
    An empty body `{}` cancels every pending and running job."""
    total = Cancelled(cancelled=0, requested=0)
    for queue, type in access.filters(who, queue=where.queue, type=where.type):
        counts = await jobqueue(request).cancel_many(type=type, queue=queue, by=Actor.of(who))
        total.cancelled += counts["cancelled"]
        total.requested += counts["requested"]
    return total


@router.post(
    "/jobs/retry",
    response_model=Retried,
    summary="Retry failed jobs by filter",
    responses=declare(BODY, INVALID, UNAVAILABLE),
)
async def retry_jobs(
    request: Request,
    who: Annotated[Principal, require(Scope.CONTROL)],
    where: Annotated[RetryFilter, Body()],
) -> Retried:
    """Every failed (and cancelled) job that matches all the filters given is pending
    again, with fresh attempts. An empty body `{}` retries every failed and cancelled job."""
    retried = 0
    for queue, type in access.filters(who, queue=where.queue, type=where.type):
        retried += await jobqueue(request).retry_many(
            type=type,
            queue=queue,
            finished_after=where.finished_after,
            finished_before=where.finished_before,
            statuses=where.statuses,
            by=Actor.of(who),
        )
    return Retried(retried=retried)


@router.get(
    "/jobs/{id}/attempts",
    response_model=AttemptList,
    summary="A job's attempts and their logs",
    responses=declare(JOB_NOT_FOUND, INVALID, UNAVAILABLE),
)
async def get_attempts(
    request: Request, who: Annotated[Principal, require(Scope.READ)], id: JobId
) -> AttemptList:
    """Every failed attempt of the job, oldest first: error, traceback (its last 8,000
    characters), worker, start, end and seconds. A lost worker's attempt has the error
    `worker lost (lease expired)` and no traceback. Each attempt carries its `log`, what
    its handler logged (null if nothing), and `log_truncated`; an attempt that did not
    fail (completed, running, cancelled) is listed too once it has logged, with no error."""
    jq = jobqueue(request)
    access.visible(await jq.get(id), who, id)
    return AttemptList(attempts=access.shown_attempts(await jq.attempts(id), who))
