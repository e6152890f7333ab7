"""Job lifecycle log events: one line per event of a job's life, under a stable name.

``job.started``, ``job.completed``, ``job.retried``, ``job.failed``, ``job.discarded``,
``job.cancelled`` and ``job.released`` come from the worker that ran the attempt;
``job.rescued`` from the leader that found its worker gone; ``job.cancelled`` also
from whoever cancelled a pending job. Each carries the fields known where it is
logged: job_id, type, queue, attempt, max_attempts, worker_id, duration_ms, wait_ms
and trace_id (docs/job-logs.md has the table).

The events of a job going well are info, and an attempt observer's (``Lifecycle``),
installed only when info is printed: at tens of thousands of jobs a second, two log
lines per job cost more than the queue itself, and with info off a worker pays
nothing for them. Those of a job going wrong are warnings, which the executor logs
through ``went_wrong`` as it writes the outcome, since it alone knows the error as
stored and the retry delay.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from jobqueue import logs
from jobqueue.db.records import ClaimedJob, Rescued
from jobqueue.logs import get_logger
from jobqueue.observability.attempts import Outcome

log = get_logger("jobqueue.lifecycle")


def trace_id(trace: Any) -> str | None:
    """The trace id of a recorded trace context's W3C ``traceparent``
    (``00-<32 hex>-<16 hex>-<2 hex>``), or None. A job enqueued in bulk is linked to it,
    its attempts traces of their own (observability/tracing.py): none for those."""
    parent = trace.get("traceparent") if isinstance(trace, dict) else None
    if not isinstance(parent, str) or trace.get("relation") == "link":
        return None
    parts = parent.split("-")
    if len(parts) < 4 or len(parts[1]) != 32 or parts[1] == "0" * 32:
        return None
    try:
        int(parts[1], 16)
    except ValueError:
        return None
    return parts[1].lower()


def attempt_fields(job: ClaimedJob, worker_id: str | None, started: datetime) -> dict[str, Any]:
    """What every worker event says of its attempt; ``started``: when it began."""
    fields = {
        "job_id": job.id,
        "type": job.type,
        "queue": job.queue,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "worker_id": worker_id,
        "wait_ms": round((started - job.run_at).total_seconds() * 1000, 3),
    }
    if job.trace is not None and (traced := trace_id(job.trace)) is not None:
        fields["trace_id"] = traced
    if job.workflow_id is not None:
        fields["workflow_id"] = job.workflow_id
    return fields


class Lifecycle:
    """The attempt observer that logs a worker's info events: job.started, and
    job.completed or job.cancelled (cancelled while it ran)."""

    def __init__(self, worker_id: str) -> None:
        self._worker_id = worker_id

    def started(self, job: ClaimedJob) -> object:
        fields = attempt_fields(job, self._worker_id, datetime.now(UTC))
        log.info("job.started", **fields)
        return fields

    def ended(
        self,
        job: ClaimedJob,
        state: object,
        outcome: Outcome,
        seconds: float,
        error: BaseException | None,
    ) -> None:
        if outcome in ("completed", "cancelled") and isinstance(state, dict):
            log.info(f"job.{outcome}", **state, duration_ms=round(seconds * 1000, 3))


def went_wrong(
    job: ClaimedJob,
    outcome: Outcome,
    worker_id: str | None,
    started: float,
    *,
    error: str | None = None,
    retry_in: float | None = None,
    exc: BaseException | None = None,
) -> None:
    """An attempt that began at ``started`` (``time.monotonic()``) ended retried, failed,
    discarded (``error``: why, as stored; ``exc``: the exception whose traceback to
    log, if any) or released by shutdown."""
    fields = ended_fields(job, worker_id, started)
    if error is not None:
        fields["error"] = error
    if retry_in is not None:
        fields["retry_in_ms"] = round(retry_in * 1000, 3)
    log.warning(f"job.{outcome}", **fields, exc_info=exc)


def snoozed(job: ClaimedJob, worker_id: str | None, started: float, delay: float) -> None:
    """An attempt snoozed: the job runs again after ``delay`` seconds, uncounted. Not a
    warning: a handler snoozes when it means to."""
    if logs.enabled("info"):
        fields = ended_fields(job, worker_id, started)
        log.info("job.snoozed", **fields, retry_in_ms=round(delay * 1000, 3))


def waiting(
    job: ClaimedJob,
    worker_id: str | None,
    started: float,
    until: datetime | None,
    waits_for: str = "time",
) -> None:
    """A run ended to wait, holding no slot: for a time (ctx.sleep, until ``until``),
    for its children or for a signal (``waits_for``)."""
    if logs.enabled("info"):
        fields = ended_fields(job, worker_id, started)
        if until is not None:
            fields["until"] = until.isoformat()
        log.info("job.waiting", **fields, waits_for=waits_for)


def ended_fields(job: ClaimedJob, worker_id: str | None, started: float) -> dict[str, Any]:
    """The fields of an attempt that began at ``started`` (``time.monotonic()``) and ends
    now: attempt_fields as of its start, and its duration."""
    seconds = time.monotonic() - started
    fields = attempt_fields(job, worker_id, datetime.now(UTC) - timedelta(seconds=seconds))
    fields["duration_ms"] = round(seconds * 1000, 3)
    return fields


def cancelled_pending(job_id: int, *, type: str | None = None, queue: str | None = None) -> None:
    """A pending job was cancelled: it ends without running again."""
    if logs.enabled("info"):
        known = {k: v for k, v in (("type", type), ("queue", queue)) if v is not None}
        log.info("job.cancelled", job_id=job_id, **known)


def rescued(job: Rescued) -> None:
    """The leader found ``job``'s worker gone (its lease expired) and ended the attempt:
    the job is pending again, failed (no attempt left) or cancelled (as asked)."""
    log.warning(
        "job.rescued",
        job_id=job.id,
        type=job.type,
        queue=job.queue,
        attempt=job.attempts,
        max_attempts=job.max_attempts,
        status=job.status,
        error="worker lost (lease expired)",
    )
