"""The job record as users see it, over HTTP and from Python."""

from __future__ import annotations

import enum
import json
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)


class JobStatus(enum.StrEnum):
    """``pending`` → ``running`` → ``completed`` | ``failed`` | ``cancelled``.

    A failed attempt with attempts left goes from ``running`` back to ``pending``
    with ``run_at`` in the future. ``failed`` after the last attempt is final
    until a manual retry.
    """

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINAL_STATES = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED})


class Job(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        json_schema_extra={
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
                }
            ]
        },
    )

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

    @classmethod
    def from_record(cls, record: Any) -> Job:
        """A row of the jobs table, trusted as it is: the schema's types and checks
        already hold, so validating it again would only cost time on every call."""
        values = {k: record[k] for k in _JOB_COLUMNS}
        values["payload"] = json.loads(values["payload"])
        values["status"] = JobStatus(values["status"])
        return cls.model_construct(**values)


_JOB_COLUMNS = tuple(Job.model_fields)

QueueName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:-]{1,100}$")]
JobType = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
# PostgreSQL integer bounds, so that an out-of-range value is a 422, not a database error.
Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]


class NewJob(BaseModel):
    """What a client may say about a job it enqueues; everything but ``type`` is optional."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"type": "send_email", "payload": {"to": "a@example.com"}},
                {"type": "report", "payload": {"id": 7}, "queue": "reports", "delay_seconds": 60},
            ]
        },
    )

    type: JobType = Field(description="Job type; a handler registered for it runs the job.")
    payload: dict[str, Any] = Field(
        default_factory=dict, description="JSON object handed to the handler."
    )
    queue: QueueName | None = Field(
        default=None, description="Queue name; default: the task's queue, else `default`."
    )
    priority: Int32 | None = Field(
        default=None, description="Lower runs first; default: the task's priority, else 0."
    )
    max_attempts: Annotated[int, Field(ge=1, le=1000)] | None = Field(
        default=None, description="Attempts before the job stays failed; default MAX_ATTEMPTS."
    )
    run_at: AwareDatetime | None = Field(
        default=None, description="Do not start before this time (with a time zone)."
    )
    delay_seconds: Annotated[float, Field(ge=0, le=10 * 365 * 86400)] | None = Field(
        default=None, description="Do not start before this many seconds from now."
    )

    @model_validator(mode="after")
    def one_start_time(self) -> NewJob:
        if self.run_at is not None and self.delay_seconds is not None:
            raise ValueError("give run_at or delay_seconds, not both")
        return self


class WorkerInfo(BaseModel):
    """A worker process, as its heartbeat row shows it."""

    id: str
    host: str
    pid: int
    queues: list[str]
    slots: int
    running: int
    started_at: datetime
    heartbeat_at: datetime
