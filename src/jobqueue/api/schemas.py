"""What the endpoints take and answer, besides the records of jobqueue.model.job and NewJob:
the OpenAPI document is built from these."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Header, Path
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from jobqueue.enqueue.new_job import NewJob, StorableText
from jobqueue.model import fields
from jobqueue.model.audit import AuditEntry
from jobqueue.model.job import Attempt, Job, JobStatus, QueueInfo

MAX_BATCH_JOBS = 10_000

# -- path parameters ----------------------------------------------------------------

JobId = Annotated[int, Path(ge=1, le=2**63 - 1, description="The job's id.")]
QueueName = Annotated[
    str, Path(pattern=fields.QUEUE_PATTERN, description="The queue's name.", examples=["mail"])
]

# -- headers ------------------------------------------------------------------------

TraceParent = Annotated[
    str | None,
    Header(
        description="W3C Trace Context: recorded with the job, so that the worker's span "
        "continues the caller's trace (its `trace_id`). A malformed value is ignored.",
        examples=["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
    ),
]
TraceState = Annotated[
    str | None,
    Header(
        description="W3C Trace Context vendor data, kept with `traceparent`.",
        examples=["congo=t61rcWkgMzE"],
    ),
]

# -- request bodies -----------------------------------------------------------------


class NewJobs(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "jobs": [
                        {"type": "send_email", "payload": {"to": "a@example.com"}},
                        {"type": "noop"},
                    ]
                }
            ]
        },
    )
    jobs: list[NewJob] = Field(min_length=1, max_length=MAX_BATCH_JOBS)


class RetryFilter(BaseModel):
    """Which jobs a bulk retry takes: all the filters given must match."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"type": "send_email", "finished_after": "2026-11-29T00:00:00Z"}]
        },
    )
    type: StorableText | None = Field(default=None, description="Only jobs of this type.")
    queue: StorableText | None = Field(default=None, description="Only jobs in this queue.")
    finished_after: AwareDatetime | None = Field(
        default=None, description="Only jobs that ended at or after this time."
    )
    finished_before: AwareDatetime | None = Field(
        default=None, description="Only jobs that ended before this time."
    )
    statuses: list[Literal["failed", "cancelled"]] = Field(
        default=["failed", "cancelled"], min_length=1, description="Which ended states to retry."
    )


class CancelFilter(BaseModel):
    """Which jobs a bulk cancel takes: all the filters given must match."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"type": "report"}]})
    type: StorableText | None = Field(default=None, description="Only jobs of this type.")
    queue: StorableText | None = Field(default=None, description="Only jobs in this queue.")


# -- responses ----------------------------------------------------------------------


class BatchCreated(BaseModel):
    ids: list[int]
    """The new jobs' ids, in the order given."""
    count: int


class JobList(BaseModel):
    jobs: list[Job]
    next_after: int | None = None
    """Pass as ``after`` to get the next page; null on the last page."""
    truncated: bool = False
    """A payload filter read its bound of jobs (``scan_limit``) and stopped: older jobs
    may match too, from ``next_after`` on (docs/search.md)."""
    scan_limit: int | None = None
    """The jobs a payload filter reads per request; null without a payload filter."""


class AttemptList(BaseModel):
    attempts: list[Attempt]
    """Failed attempts and those that logged, oldest first; a job that never failed
    and never logged has none."""


class Cancelled(BaseModel):
    cancelled: int
    """Pending jobs cancelled at once."""
    requested: int
    """Running jobs asked to stop; their workers end them cancelled."""


class Retried(BaseModel):
    retried: int
    """How many jobs are pending again."""


class QueueList(BaseModel):
    queues: list[QueueInfo]


class Health(BaseModel):
    status: str
    version: str = Field(description="This process's jobqueue release (CHANGELOG.md).")
    schema_version: int = Field(
        description="The last migration this release's code needs (docs/migrations.md)."
    )


class Readiness(BaseModel):
    status: str
    database: str
    listener: str | None = None


class AuditList(BaseModel):
    entries: list[AuditEntry]
    """Control actions, newest first."""
    next_after: int | None = None
    """Pass as ``after`` to get the next page; null on the last page."""


# -- errors (api/errors.py builds them; api/responses.py declares them) ---------------


class FieldError(BaseModel):
    field: str
    """The location without its body/path/query/header prefix, e.g. ``jobs.3.type``."""
    loc: list[str | int]
    msg: str
    type: str


class FieldErrors(BaseModel):
    detail: list[FieldError]


class Problem(BaseModel):
    detail: str


class StateConflict(BaseModel):
    detail: str
    status: JobStatus
    """The job's state, which the request does not apply to."""


class EnqueueUnavailable(BaseModel):
    detail: str
    stored: Literal[False, "unknown"] | None = None
    """Whether the jobs may have been stored: false, retry; "unknown", retry with the
    same Idempotency-Key or unique_key (absent when the database was not reached to
    store anything)."""


class JobGone(BaseModel):
    detail: str
    job_id: int
    """The job the Idempotency-Key was used for, since deleted by retention."""
