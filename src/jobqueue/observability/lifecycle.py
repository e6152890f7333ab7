"""Job lifecycle log events: one line per event of a job's life, under a stable name.

``job.started``, ``job.completed``, ``job.retried``, ``job.failed``, ``job.discarded``,
``job.cancelled`` and ``job.released`` come from the worker that ran the attempt;
``job.rescued`` from the leader that found its worker gone; ``job.cancelled`` also
from whoever cancelled a pending job. Each carries the fields known where it is
logged: job_id, type, queue, attempt, max_attempts, worker_id, duration_ms, wait_ms
and trace_id (docs/job-logs.md has the table). The events of a job going well are
info, those of it going wrong warnings: with info off, the worker skips the former
entirely, which at tens of thousands of jobs a second is worth having.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from jobqueue import logs
from jobqueue.db.records import ClaimedJob, Rescued
from jobqueue.observability.attempts import Outcome

log = structlog.get_logger("jobqueue.lifecycle")

# The level of each attempt's end: warnings are what an operator looks into.
LEVELS: dict[Outcome, str] = {
    "completed": "info",
    "cancelled": "info",
    "retried": "warning",
    "failed": "warning",
    "discarded": "warning",
    "released": "warning",
}


def trace_id(trace: dict[str, str] | None) -> str | None:
    """The trace id of a W3C ``traceparent`` (``00-<32 hex>-<16 hex>-<2 hex>``), or None."""
    if not trace:
        return None
    parts = trace.get("traceparent", "").split("-")
    if len(parts) < 4 or len(parts[1]) != 32 or parts[1] == "0" * 32:
        return None
    try:
        int(parts[1], 16)
    except ValueError:
        return None
    return parts[1].lower()


class Lifecycle:
    """The attempt observer that logs a worker's lifecycle events."""

    def __init__(self, worker_id: str) -> None:
        self._worker_id = worker_id
        self._info = logs.enabled("info")

    def started(self, job: ClaimedJob) -> object:
        if not self._info:  # the hot path: nothing at all
            return None
        fields = self._fields(job, datetime.now(UTC))
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
        level = LEVELS[outcome]
        if level == "info" and not self._info:
            return
        fields: dict[str, Any] = (
            dict(state)
            if isinstance(state, dict)
            else self._fields(job, datetime.now(UTC) - timedelta(seconds=seconds))
        )
        fields["duration_ms"] = round(seconds * 1000, 3)
        if level == "info":
            log.info(f"job.{outcome}", **fields)
            return
        if error is not None and outcome != "released":
            # jobqueue's own (a timeout, RetryAt, Discard...) say it all in their message.
            plain = type(error).__module__.startswith("jobqueue.")
            fields["error"] = str(error) if plain else f"{type(error).__name__}: {error}"
            if not plain:
                fields["exc_info"] = error
        log.warning(f"job.{outcome}", **fields)

    def _fields(self, job: ClaimedJob, started: datetime) -> dict[str, Any]:
        fields = {
            "job_id": job.id,
            "type": job.type,
            "queue": job.queue,
            "attempt": job.attempt,
            "max_attempts": job.max_attempts,
            "worker_id": self._worker_id,
            "wait_ms": round((started - job.run_at).total_seconds() * 1000, 3),
        }
        if job.trace is not None and (traced := trace_id(job.trace)) is not None:
            fields["trace_id"] = traced
        return fields


def rescued(job: Rescued) -> None:
    """The leader found ``job``'s worker gone (its lease expired) and ended the attempt:
    the job is pending again, failed (no attempt left) or cancelled (as asked)."""
    log.warning(
        "job.rescued",
        job_id=job.id,
        attempt=job.attempts,
        max_attempts=job.max_attempts,
        status=job.status,
        error="worker lost (lease expired)",
    )


def cancelled_pending(job_id: int, *, type: str | None = None, queue: str | None = None) -> None:
    """A pending job was cancelled: it ends without running again."""
    if logs.enabled("info"):
        known = {k: v for k, v in (("type", type), ("queue", queue)) if v is not None}
        log.info("job.cancelled", job_id=job_id, **known)
