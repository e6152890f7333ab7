"""What the HTTP worker protocol's routes take and answer (api/work_routes.py,
docs/http-workers.md), each field with its bounds."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from jobqueue.http_workers.leases import BIGINT_MAX, WORKER_NAME
from jobqueue.model import fields
from jobqueue.retry import MAX_SNOOZE_SECONDS

MAX_CLAIM = 100  # jobs in one claim
MAX_BATCH = 1000  # leases, outcomes or log lines in one call
MAX_WAIT_SECONDS = 60.0  # a long poll's wait; under most proxies' idle timeouts
MIN_LEASE_SECONDS, MAX_LEASE_SECONDS = 1.0, 3600.0


def _a_lease(text: str) -> str:
    """``text``, whose form LEASE_PATTERN has checked, if its two numbers fit a bigint
    (a job's id, a claim's token): run for every outcome of a batch, it looks no
    further."""
    job_id, claim, _ = text.split(".", 2)
    if int(job_id) > BIGINT_MAX or int(claim) > BIGINT_MAX:
        raise ValueError("not a lease (give the `lease` a claim answered)")
    return text


# The lease's form (leases.py), so that the document says what a lease looks like; the
# validator checks what a pattern cannot, its numbers' bounds.
LEASE_PATTERN = r"^\d{1,19}\.\d{1,19}\.[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}$"
LeaseText = Annotated[
    str, StringConstraints(max_length=200, pattern=LEASE_PATTERN), AfterValidator(_a_lease)
]
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
    outcomes: list[OutcomeIn] = Field(
        default_factory=list, max_length=MAX_BATCH,
        description="Outcomes of jobs this worker ran (as POST /outcomes would apply "
        "them), applied while the claim is made if it does not wait (wait_seconds 0), "
        "else before it: the worker's next claim and its last outcomes in one request. "
        "A job they make claimable (a released workflow child, a freed concurrency "
        "slot) may go to a later claim.",
    )  # fmt: skip


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
    tags: list[str] = Field(default_factory=list, description="The job's tags (docs/search.md).")
    meta: dict[str, Any] = Field(
        default_factory=dict, description="The job's metadata object (docs/search.md)."
    )


class ClaimAnswer(BaseModel):
    jobs: list[LeasedJob]
    outcomes: list[OutcomeApplied] = Field(
        default_factory=list,
        description="One per outcome sent with the claim, in the request's order.",
    )


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


class ReleaseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lease: LeaseText


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


SnoozeSeconds = Annotated[float, Field(ge=0, le=MAX_SNOOZE_SECONDS, allow_inf_nan=False)]


class SnoozeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lease: LeaseText
    seconds: SnoozeSeconds = Field(description="Run the job again after this long.")


class Outcome(BaseModel):
    id: int
    status: Literal["completed", "pending", "failed", "cancelled"] = Field(
        description="`completed`; or after a failure `pending` (retried), `failed`, or "
        "`cancelled` (the job was asked to stop)."
    )
    retry_in_seconds: float | None = None


class LogsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lease: LeaseText
    lines: list[
        Annotated[str, StringConstraints(max_length=16_000), AfterValidator(fields.storable)]
    ] = Field(min_length=1, max_length=MAX_BATCH)


class LogsAnswer(BaseModel):
    truncated: bool = Field(
        description="The attempt's log reached JOBQUEUE_JOB_LOG_BYTES: later lines are dropped."
    )


class HeartbeatsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    leases: list[LeaseText] = Field(min_length=1, max_length=MAX_BATCH)
    lease_seconds: LeaseSeconds | None = Field(
        default=None, description="Renew each for this long; default JOBQUEUE_LEASE_SECONDS."
    )


class LeaseRenewal(BaseModel):
    lease: str
    ok: bool = Field(description="Renewed; false: the lease lost its job (nothing changed).")
    lease_expires_at: datetime | None = None
    cancel_requested: bool = False
    detail: str | None = None


class HeartbeatsAnswer(BaseModel):
    leases: list[LeaseRenewal] = Field(description="One per lease, in the request's order.")


class OutcomeIn(BaseModel):
    """A completion (``result``); with ``error`` a failure (``retry_in_seconds``,
    ``discard``); with ``snooze_seconds`` a snooze (run again later, the attempt not
    counted)."""

    model_config = ConfigDict(extra="forbid")

    lease: LeaseText
    result: StorableJson = None
    error: ErrorIn | None = None
    retry_in_seconds: Annotated[float, Field(ge=0, le=fields.MAX_DELAY_SECONDS)] | None = None
    discard: bool = False
    snooze_seconds: SnoozeSeconds | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> OutcomeIn:
        if self.snooze_seconds is not None and (self.error is not None or self.result is not None):
            raise ValueError("snooze_seconds: a snooze has no result or error")
        return self


class OutcomesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    outcomes: list[OutcomeIn] = Field(min_length=1, max_length=MAX_BATCH)


class OutcomeApplied(BaseModel):
    lease: str
    ok: bool = Field(
        description="Applied, now or before (the same outcome sent again: nothing changed); "
        "false: the lease lost its job (nothing changed)."
    )
    id: int
    status: Literal["completed", "pending", "failed", "cancelled"] | None = None
    retry_in_seconds: float | None = None
    detail: str | None = None


class OutcomesAnswer(BaseModel):
    outcomes: list[OutcomeApplied] = Field(description="One per outcome, in the request's order.")


# ClaimRequest and ClaimAnswer name the outcomes' models, declared after them.
ClaimRequest.model_rebuild()
ClaimAnswer.model_rebuild()
