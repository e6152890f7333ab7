"""The job record as users see it, over HTTP and from Python.

Plain dataclasses: a worker process reads jobs without loading pydantic (see
jobqueue.model.fields). FastAPI and pydantic serialise them as they are; ``__pydantic_config__``
only adds an OpenAPI example.
"""

from __future__ import annotations

import dataclasses
import enum
from datetime import datetime
from typing import Any, ClassVar

from jobqueue.model.json_text import loads
from jobqueue.model.limits import LimitsInfo


class JobStatus(enum.StrEnum):
    """``pending`` → ``running`` → ``completed`` | ``failed`` | ``cancelled``.

    A failed attempt with attempts left goes from ``running`` back to ``pending``
    with ``run_at`` in the future. ``failed`` after the last attempt is final
    until a manual retry. A workflow's job waits ``blocked`` until its parents have
    ended (docs/workflows.md), then is ``pending``. A job whose handler called
    ``ctx.sleep`` is ``waiting`` until its ``run_at``, holding no worker's slot, then
    ``pending`` again (docs/durable.md).
    """

    BLOCKED = "blocked"
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    WAITING = "waiting"


FINAL_STATES = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED})
RETRYABLE_STATES = frozenset({JobStatus.FAILED, JobStatus.CANCELLED})
# The last_error of a job that ended cancelled because it was asked to stop while it
# ran (not one cancelled before it started, nor one rescued after a cancel request).
CANCELLED_WHILE_RUNNING = "cancelled while running"


class JobNotFound(LookupError):
    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} not found")
        self.job_id = job_id


class JobStateError(Exception):
    """The job is in a state the operation does not apply to (HTTP 409)."""

    def __init__(self, job: Job, action: str, allowed: str) -> None:
        super().__init__(
            f"cannot {action} job {job.id}: it is {job.status}; only {allowed} jobs can be"
        )
        self.job = job


# Not frozen: a frozen dataclass sets each of its 25 fields through object.__setattr__,
# which made building one from its row cost 53,000 instructions, a sixth of a
# ``jq.enqueue`` (callgrind, 2026-12-06), against 21,000 now. A Job is a snapshot
# of its row: changing one changes nothing stored. (With its list and dict fields it
# was never hashable.)
@dataclasses.dataclass(slots=True)
class Job:
    __pydantic_config__: ClassVar[dict[str, Any]] = {
        "json_schema_extra": {
            "examples": [
                {
                    "id": 28,
                    "type": "send_email",
                    "queue": "default",
                    "payload": {"to": "a@example.com"},
                    "status": "completed",
                    "attempts": 1,
                    "max_attempts": 3,
                    "priority": 0,
                    "run_at": "2026-11-29T10:00:00Z",
                    "last_error": None,
                    "worker_id": None,
                    "created_at": "2026-11-29T10:00:00Z",
                    "updated_at": "2026-11-29T10:00:00.05Z",
                    "started_at": "2026-11-29T10:00:00.01Z",
                    "finished_at": "2026-11-29T10:00:00.05Z",
                    "unique_key": None,
                    "cancel_requested_at": None,
                    "result": {"message_id": "<20261129.1@example.com>"},
                    "progress": {
                        "fraction": 1.0,
                        "message": "sent",
                        "updated_at": "2026-11-29T10:00:00.04Z",
                    },
                    "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
                    "tags": ["welcome"],
                    "meta": {"customer": "acme"},
                }
            ]
        },
    }

    id: int
    type: str
    queue: str
    payload: Any
    status: JobStatus
    attempts: int
    max_attempts: int
    priority: int
    run_at: datetime
    last_error: str | None
    worker_id: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    unique_key: str | None
    cancel_requested_at: datetime | None
    result: Any
    """What the handler returned (JSON), once completed; null if it returned None."""
    progress: Progress | None
    """The running attempt's last reported progress (kept when the job ends)."""
    trace_id: str | None = None
    """The trace its enqueuer was in (32 hex digits), if one was recorded (Tracing)."""
    workflow_id: int | None = None
    """The workflow the job belongs to (docs/workflows.md), if any."""
    concurrency_key: str | None = None
    """The key its queue's per-key limits count it under (docs/limits.md), if any."""
    tags: list[str] = dataclasses.field(default_factory=list)
    """Its tags, to find it by (docs/search.md); [] if it has none."""
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Its metadata, a JSON object to find it by (docs/search.md); {} if it has none."""
    checkpoint: Any = None
    """The cursor its handler last saved with ``ctx.checkpoint`` (docs/durable.md),
    where its next attempt resumes; null if none."""

    @classmethod
    def from_record(cls, record: Any) -> Job:
        """A row of the jobs table, trusted as it is: the schema's types and checks
        already hold, so validating it again would only cost time on every call."""
        # Every field by position, in the class's order (a test holds the two together):
        # this runs for every job enqueued or read, and keyword arguments, a dict of
        # them and the enum's own lookup cost it half its time.
        payload, result, progress = record["payload"], record["result"], record["progress"]
        trace, tags, meta = record["trace_context"], record["tags"], record["meta"]
        checkpoint = record.get("checkpoint")  # not in the rows a few queries pick
        payload = {} if payload == "{}" else loads(payload)  # jsonb as text, on every driver
        if result is not None:
            result = loads(result)
        if meta is not None:
            meta = loads(meta)
        if checkpoint is not None:
            checkpoint = loads(checkpoint)
        return cls(
            record["id"], record["type"], record["queue"], payload, _STATUSES[record["status"]],
            record["attempts"], record["max_attempts"], record["priority"], record["run_at"],
            record["last_error"], record["worker_id"], record["created_at"],
            record["updated_at"], record["started_at"], record["finished_at"],
            record["unique_key"], record["cancel_requested_at"], result,
            None if progress is None else Progress.from_json(progress),
            None if trace is None else trace_id_of(trace), record["workflow_id"],
            record["concurrency_key"], [] if tags is None else tags, {} if meta is None else meta,
            checkpoint,
        )  # fmt: skip


@dataclasses.dataclass(frozen=True, slots=True)
class Progress:
    """What a handler last said of its progress (``ctx.progress``)."""

    fraction: float | None
    """From 0 to 1, or null if the handler gave only a message."""
    message: str | None
    updated_at: datetime

    @classmethod
    def from_json(cls, text: str) -> Progress:
        value = loads(text)
        return cls(value["fraction"], value["message"], datetime.fromisoformat(value["updated_at"]))


_STATUSES = {status.value: status for status in JobStatus}


def trace_id_of(trace_context: Any) -> str | None:
    """The trace id in a stored trace context (observability/trace_context.py), whose
    traceparent is ``00-<trace id>-<span id>-<flags>``; None if it has none."""
    if isinstance(trace_context, str):  # its column's text, or a claim's decoded object
        trace_context = loads(trace_context)
    parent = trace_context.get("traceparent") if isinstance(trace_context, dict) else None
    return parent[3:35] if isinstance(parent, str) and len(parent) >= 35 else None


@dataclasses.dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker process, as its heartbeat row shows it."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {
        "json_schema_extra": {
            "examples": [
                {
                    "id": "web-1:4242:1f2e3d",
                    "host": "web-1",
                    "pid": 4242,
                    "queues": ["default", "mail"],
                    "slots": 10,
                    "running": 3,
                    "started_at": "2026-11-29T10:00:00Z",
                    "heartbeat_at": "2026-11-29T10:05:00Z",
                    "types": ["send_email", "report"],
                    "any_type": False,
                }
            ]
        }
    }

    id: str
    host: str
    pid: int
    queues: list[str]
    slots: int
    running: int
    started_at: datetime
    heartbeat_at: datetime
    types: list[str] | None = None
    """The job types it has handlers for; None for a worker of a version that did not
    say."""
    any_type: bool = True
    """Whether it claims jobs of every type (``--claim-any-type``), failing those it has
    no handler for; otherwise only those of ``types``."""


@dataclasses.dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of a job, from its attempt history: every failed one, and any other
    (completed, running, cancelled) that logged something."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {
        "json_schema_extra": {
            "examples": [
                {
                    "attempt": 1,
                    "worker_id": "web-1:4242:1f2e3d",
                    "error": "TimeoutError: smtp.example.com did not answer",
                    "traceback": "Traceback (most recent call last):\n  ...",
                    "started_at": "2026-11-29T10:00:00Z",
                    "finished_at": "2026-11-29T10:00:30Z",
                    "seconds": 30.0,
                    "log": "2026-11-29T10:00:01.250Z info connecting host=smtp.example.com\n",
                    "log_truncated": False,
                }
            ]
        }
    }

    attempt: int
    worker_id: str | None
    error: str | None
    """Why it failed; null for an attempt that did not fail."""
    traceback: str | None
    started_at: datetime | None
    finished_at: datetime | None
    """Null while the attempt runs."""
    seconds: float | None
    """How long the attempt ran, from its claim to its recorded end."""
    log: str | None = None
    """What the handler logged (``ctx.log``), one line each; null if nothing was written.
    See the job logs page of the docs."""
    log_truncated: bool = False
    """The log reached JOBQUEUE_JOB_LOG_BYTES and ends with a truncation marker line."""


@dataclasses.dataclass(frozen=True, slots=True)
class QueueInfo:
    """A queue at a glance: jobs by state, its controls, and how far behind it is."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {
        "json_schema_extra": {
            "examples": [
                {
                    "name": "mail",
                    "pending": 1200,
                    "running": 10,
                    "completed": 48210,
                    "failed": 3,
                    "cancelled": 0,
                    "paused": False,
                    "paused_at": None,
                    "oldest_pending_seconds": 4.2,
                    "unhandled": 0,
                    "waiting": 0,
                }
            ]
        }
    }

    name: str
    pending: int
    running: int
    completed: int
    failed: int
    cancelled: int
    paused: bool
    paused_at: datetime | None
    oldest_pending_seconds: float | None
    """How long the longest-waiting due job has waited; None when none is due."""
    limits: LimitsInfo | None = None
    """Its limits shared by every worker, their use and the jobs they hold back; None
    when it has none (docs/limits.md)."""
    unhandled: int = 0
    """Pending jobs that wait for a handler: of a type that no live worker serving the
    queue has a handler for (or with no live worker serving it at all)."""
    waiting: int = 0
    """Jobs asleep in a durable sleep (``ctx.sleep``, docs/durable.md), holding no
    worker's slot: pending again at their time."""
