"""The endpoints: jobs, health and readiness."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

from fastapi import APIRouter, Body, Header, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse

from jobqueue.api import idempotency_header
from jobqueue.api.errors import field_error
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
    Health,
    JobGone,
    JobId,
    JobList,
    NewJobs,
    QueueList,
    QueueName,
    Readiness,
    Retried,
    RetryFilter,
    TraceParent,
    TraceState,
)
from jobqueue.app import JobQueue
from jobqueue.audit import Actor
from jobqueue.auth import access
from jobqueue.auth.authenticator import require
from jobqueue.db.pool import is_unavailable
from jobqueue.encoding import to_json
from jobqueue.enqueue.idempotency import IdempotencyKey, IdempotencyKeyReused
from jobqueue.enqueue.new_job import NewJob, StorableText
from jobqueue.model import fields
from jobqueue.model.job import FINAL_STATES, Job, JobStatus, QueueInfo, WorkerInfo
from jobqueue.model.tokens import Principal, Scope
from jobqueue.task import PayloadError, job_options

router = APIRouter()
# One encoder for every request: json.dumps with options builds a new one each time.
_JSON = json.JSONEncoder(separators=(",", ":"))

READY_TIMEOUT_SECONDS = 2.0
# Longest long-poll of GET /jobs/{id}?wait=: an open request per waiting client; keep
# it under the idle timeout of the proxies in front.
MAX_WAIT_SECONDS = 300.0


def jobqueue(request: Request) -> JobQueue:
    jq: JobQueue = request.app.state.jobqueue
    return jq


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


async def enqueue_one(
    jq: JobQueue,
    who: Principal,
    new: NewJob,
    *,
    check_types: bool,
    idempotency_key: str | None,
    trace: dict[str, str | None],
) -> tuple[Job, bool]:
    """POST /jobs once its request is parsed: the job, and whether it is new. Raises
    the HTTPException to answer (IdempotentJobGone: the 410, see api/errors.py)."""
    problems = check(jq, check_types, new, ["body"])
    if problems:
        raise HTTPException(problems_status(problems), detail=problems)
    refused = access.may_enqueue(who, queue=queue_of(jq, new), type=new.type, field="body")
    if refused is not None:
        raise refused
    remembered = None if idempotency_key is None else idempotency_of(jq, who, idempotency_key, new)
    try:
        return await jq.enqueue_job(new, headers=trace, idempotency_key=remembered)
    except IdempotencyKeyReused as exc:
        raise HTTPException(422, detail=[idempotency_error(str(exc), "reused")]) from exc


def idempotency_of(jq: JobQueue, who: Principal, header: str, new: NewJob) -> IdempotencyKey:
    """The request's key, its caller's, bound to the request (a 422 if malformed)."""
    try:
        key = idempotency_header.parse(header)
    except ValueError as exc:
        raise HTTPException(422, detail=[idempotency_error(str(exc), "invalid")]) from exc
    return IdempotencyKey(
        key=key,
        principal=who.name,
        request_hash=idempotency_header.request_hash(new),
        ttl_seconds=jq.settings.idempotency_ttl,
    )


def idempotency_error(msg: str, type: str) -> dict[str, object]:
    return field_error(["header", idempotency_header.HEADER], msg, f"idempotency_key_{type}")


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


async def enqueue_batch(
    jq: JobQueue,
    who: Principal,
    batch: NewJobs,
    *,
    check_types: bool,
    trace: dict[str, str | None],
) -> list[int]:
    """POST /jobs/batch once its request is parsed: the new jobs' ids."""
    problems = [
        problem
        for i, new in enumerate(batch.jobs)
        for problem in check(jq, check_types, new, ["body", "jobs", i])
    ]
    if problems:
        raise HTTPException(problems_status(problems), detail=problems)
    for i, new in enumerate(batch.jobs):
        where = queue_of(jq, new)
        refused = access.may_enqueue(who, queue=where, type=new.type, field=f"jobs.{i}")
        if refused is not None:
            raise refused
    return await jq.enqueue_jobs(batch.jobs, headers=trace)


def check(
    jq: JobQueue, check_types: bool, new: NewJob, loc: list[str | int]
) -> list[dict[str, object]]:
    """What the model cannot check alone: the payload's size and the type's handler, and
    in a batch, that no job has a unique key."""
    problems = []
    if "jobs" in loc and new.unique_key is not None:
        problems.append(
            field_error(
                [*loc, "unique_key"], "not supported in a batch; use POST /jobs", "not_supported"
            )
        )
    size = len(_JSON.encode(new.payload).encode())
    if size > jq.settings.max_payload_bytes:
        problems.append(
            field_error(
                [*loc, "payload"],
                f"payload is {size} bytes; the limit is {jq.settings.max_payload_bytes} "
                "(JOBQUEUE_MAX_PAYLOAD_BYTES)",
                "too_large",
            )
        )
    task = jq.tasks.get(new.type)
    if task is not None and task.payload_type is not None:
        try:
            task.dump(new.payload)
        except PayloadError as exc:
            problems.extend(
                field_error([*loc, "payload", *e["loc"]], e["msg"], e["type"]) for e in exc.errors
            )
    if check_types and task is None:
        known = ", ".join(sorted(jq.tasks)) or "none"
        problems.append(
            field_error(
                [*loc, "type"],
                f"no handler is registered for type {new.type!r}; known types: {known}",
                "unknown_type",
            )
        )
    return problems


def queue_of(jq: JobQueue, new: NewJob) -> str:
    """The queue the job will be stored in, for a token's reach."""
    queue, _, _ = job_options(jq.tasks.get(new.type), jq.settings, new.queue)
    return queue


def problems_status(problems: list[dict[str, object]]) -> int:
    return 413 if all(p["type"] == "too_large" for p in problems) else 422


@router.get(
    "/jobs/{id}",
    response_model=Job,
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
    """The job as stored now: state, attempts, last error, result, progress, times.
    With `wait`, the answer waits (woken by the database, not by polling) until the
    job is final or `wait` seconds have passed; a server shutting down answers at once."""
    jq = jobqueue(request)
    job = access.visible(await jq.get(id), who, id)
    if wait is not None and job.status not in FINAL_STATES:
        job = access.shown(await long_poll(jq, id, wait, request.app.state.stopping), who)
    return job_response(job)


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
        {202: {"description": "The job is running: its worker was asked to stop it"}},
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


def job_response(job: Job, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    # The job was validated when it was built: serialise it once, without FastAPI
    # validating it again against the response model.
    return Response(to_json(job), status, headers, media_type="application/json")


@router.get(
    "/jobs",
    response_model=JobList,
    summary="List jobs, newest first",
    responses=declare(INVALID, UNAVAILABLE),
)
async def list_jobs(
    request: Request,
    who: Annotated[Principal, require(Scope.READ)],
    status: Annotated[JobStatus | None, Query(description="Only jobs in this state.")] = None,
    type: Annotated[StorableText | None, Query(description="Only jobs of this type.")] = None,
    queue: Annotated[StorableText | None, Query(description="Only jobs in this queue.")] = None,
    limit: Annotated[int, Query(ge=1, le=500, description="Page size.")] = 50,
    after: Annotated[
        int | None,
        Query(ge=1, le=2**63 - 1, description="Cursor: `next_after` of the previous page."),
    ] = None,
) -> JobList:
    """Jobs newest first, filtered by state, type and queue (`?status=failed` lists the dead
    letters). Pass `next_after` from one page as `after` to get the next."""
    scope = access.reach(who, queue=queue, type=type)
    if scope is None:
        return JobList(jobs=[], next_after=None)
    queues, types = scope
    jobs = await jobqueue(request).list(
        status=status, type=types, queue=queues, after=after, limit=limit
    )
    shown = [access.shown(job, who) for job in jobs]
    return JobList(jobs=shown, next_after=jobs[-1].id if len(jobs) == limit else None)


@router.get(
    "/queues",
    response_model=QueueList,
    summary="Every queue at a glance",
    responses=UNAVAILABLE,
)
async def list_queues(
    request: Request, who: Annotated[Principal, require(Scope.READ)]
) -> QueueList:
    """Each queue with jobs or controls: its jobs by state, whether it is paused, and
    `oldest_pending_seconds`, how long its longest-waiting due job has waited (null when
    none is due). The counts are kept by triggers as jobs change, so this reads a few
    rows however many millions of jobs there are."""
    return QueueList(queues=access.queues_shown(await jobqueue(request).queues(), who))


@router.post(
    "/queues/{name}/pause",
    response_model=QueueInfo,
    summary="Pause a queue",
    responses=declare(INVALID, UNAVAILABLE),
)
async def pause_queue(
    request: Request, who: Annotated[Principal, require(Scope.QUEUES)], name: QueueName
) -> QueueInfo:
    """No worker starts a job of this queue until it is resumed; running jobs finish, and
    new jobs are still accepted. Takes effect at each worker's next claim."""
    access.may_control_queue(who, name)
    return await jobqueue(request).pause(name, by=Actor.of(who))


@router.post(
    "/queues/{name}/resume",
    response_model=QueueInfo,
    summary="Resume a queue",
    responses=declare(INVALID, UNAVAILABLE),
)
async def resume_queue(
    request: Request, who: Annotated[Principal, require(Scope.QUEUES)], name: QueueName
) -> QueueInfo:
    """Workers start the queue's jobs again at once (they are woken by NOTIFY)."""
    access.may_control_queue(who, name)
    return await jobqueue(request).resume(name, by=Actor.of(who))


@router.get(
    "/workers",
    response_model=list[WorkerInfo],
    summary="Worker processes",
    responses=UNAVAILABLE,
)
async def list_workers(
    request: Request, who: Annotated[Principal, require(Scope.READ)]
) -> list[WorkerInfo]:
    """Every worker process with a recent heartbeat: host, pid, queues, slots and how many
    jobs it runs now. A token restricted to queues sees the workers that serve one of
    them, and of each only those queues."""
    return access.workers_shown(await jobqueue(request).workers(), who)


@router.get("/healthz", response_model=Health, summary="Is the process alive?")
async def healthz() -> Health:
    """The process answers; says nothing about the database (see /readyz)."""
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    summary="Can the database be reached?",
    responses={503: {"description": "The database did not answer", "model": Readiness}},
)
async def readyz(request: Request) -> Response:
    """200 when the database answers within 2 s, else 503; `listener` says whether workers
    are woken by NOTIFY or, while it is down, by polling."""
    jq = jobqueue(request)
    listener = request.app.state.listener_health()
    try:
        await asyncio.wait_for(jq.ping(), READY_TIMEOUT_SECONDS)
    except Exception as exc:
        if not is_unavailable(exc):
            raise
        body = Readiness(status="unavailable", database="unreachable", listener=listener)
        return JSONResponse(body.model_dump(), status_code=503)
    return JSONResponse(Readiness(status="ready", database="ok", listener=listener).model_dump())


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={
        200: {
            "description": "The Prometheus text exposition format (see docs/observability.md)",
            "content": {"text/plain": {}},
        },
        404: {"description": "Metrics are off (JOBQUEUE_METRICS=off)"},
        503: {"description": "The API tokens cannot be read (the database is unavailable)"},
    },
)
async def metrics(request: Request, who: Annotated[Principal, require(Scope.METRICS)]) -> Response:
    """This process's metrics: its jobs, attempts, claims, pool and HTTP requests, and
    the queue gauges if it holds the maintenance lead."""
    exporter = request.app.state.metrics
    if exporter is None:
        raise HTTPException(404, detail="metrics are off (JOBQUEUE_METRICS=off)")
    body, content_type = exporter.exposition()
    return Response(body, media_type=content_type)
