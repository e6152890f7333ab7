"""The typed records the store takes and returns, besides the public ones of jobqueue.model.job."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from jobqueue.model.job import Job, JobStatus, trace_id_of
from jobqueue.model.json_text import loads

if TYPE_CHECKING:
    from jobqueue.model.options import EnqueueOptions


# Not frozen, nor JobRow: see jobqueue.model.job.Job; built for every job enqueued.
@dataclass(slots=True)
class JobOptions:
    """A new job's columns but its payload: checked, with its task's defaults filled in."""

    type: str
    queue: str
    priority: int
    max_attempts: int
    run_at: datetime | None  # None: now, plus delay_seconds
    delay_seconds: float | None


@dataclass(slots=True)
class JobRow(JobOptions):
    """A new job's row: its options and its payload as JSON text (an application's own
    connection has no jsonb codec, so the text is what every connection kind takes)."""

    payload: str
    # The trace context to record, as JSON text (observability/trace_context.py); None: none.
    trace: str | None = None
    # Its concurrency key (docs/limits.md); None: none.
    concurrency_key: str | None = None
    # Its tags, and its metadata as JSON text (docs/search.md); None: none.
    tags: list[str] | None = None
    meta: str | None = None

    def stored(self, record: Any) -> Job:
        """The job this row became: the database chose only its ``id``, ``run_at`` and
        ``created_at`` (what enqueue.sql returns); every other field is the row's own or
        a new job's. Reading all 35 columns back and decoding them cost a single
        enqueue about 4% of its time (see enqueue.sql)."""
        created = record["created_at"]
        payload, meta = self.payload, self.meta
        return Job(
            record["id"], self.type, self.queue, {} if payload == "{}" else loads(payload),
            JobStatus.PENDING, 0, self.max_attempts, self.priority, record["run_at"], None,
            None, created, created, None, None, None, None, None, None,
            None if self.trace is None else trace_id_of(self.trace), None,
            self.concurrency_key, [] if self.tags is None else list(self.tags),
            {} if meta is None else loads(meta), None,
        )  # fmt: skip


class UniqueKey(NamedTuple):
    """A job's unique key (docs/unique-jobs.md): held while it is pending or running,
    and ``hold`` seconds after it completed; ``on_conflict`` says what an enqueue under
    it does while another job holds it: ``return`` that job, ``replace`` or
    ``debounce`` it."""

    key: str
    hold: float | None = None
    on_conflict: str | None = None

    @classmethod
    def of(cls, key: str | None, hold: float | None, on_conflict: str | None) -> UniqueKey | None:
        return None if key is None else cls(key, hold, on_conflict)

    @classmethod
    def of_options(cls, options: EnqueueOptions) -> UniqueKey | None:
        """The unique key an enqueue's options name, if any."""
        return cls.of(
            options.get("unique_key"), options.get("unique_for"), options.get("on_conflict")
        )


class ClaimKey(NamedTuple):
    """A job's place in the claim order: best priority (lowest) first, then earliest due."""

    priority: int
    run_at: datetime
    id: int


# Not frozen: a frozen dataclass sets each field through object.__setattr__, a tenth
# of a worker's CPU per no-op job for this one. Nothing changes a claimed job.
@dataclass(slots=True, eq=False)
class ClaimedJob:
    """A job as a worker holds it: what the claim returned."""

    id: int
    type: str
    queue: str
    payload: Any
    attempt: int
    max_attempts: int
    priority: int
    run_at: datetime  # when it fell due: its start minus this is how long it waited
    # The W3C trace context its enqueuer recorded ({"traceparent": ..., "tracestate": ...}).
    trace: dict[str, str] | None = None
    workflow_id: int | None = None  # the workflow it belongs to, if any
    # Its claim's token (migration 0022), which every write about this run names: a
    # claim a database crash forgot cannot be taken for the one that replaced it.
    claim: int | None = None
    tags: list[str] | None = None  # None: none set (migration 0030)
    # Its metadata as JSON text, decoded only where read (ctx.meta, a claim over HTTP):
    # decoding it for every claimed job was a sixth of a worker's CPU per tagged job.
    meta_json: str | None = None
    # The cursor its handler last saved (ctx.checkpoint, migration 0032), as JSON text,
    # decoded only where read (ctx.last_checkpoint).
    checkpoint_json: str | None = None

    @classmethod
    def from_record(cls, r: Any) -> ClaimedJob:
        # Positional access: claim.sql returns id, type, queue, payload, attempts,
        # max_attempts, priority, run_at, trace_context, workflow_id, claim_token, tags,
        # meta, checkpoint, in that order.
        payload, trace = r[3], r[8]
        return cls(
            r[0], r[1], r[2], {} if payload == "{}" else loads(payload), r[4], r[5], r[6],
            r[7], None if trace is None else loads(trace), r[9], r[10], r[11], r[12],
            r[13],
        )  # fmt: skip

    @property
    def meta(self) -> dict[str, Any]:
        """Its metadata, decoded ({} for none)."""
        return {} if self.meta_json is None else loads(self.meta_json)

    @property
    def key(self) -> ClaimKey:
        return ClaimKey(self.priority, self.run_at, self.id)

    @property
    def attempts_left(self) -> bool:
        return self.attempt < self.max_attempts


@dataclass(frozen=True, slots=True)
class Failure:
    """A failed attempt, to be written: retried after ``delay`` seconds, or the last."""

    job: ClaimedJob
    error: str
    traceback: str | None
    delay: float | None  # None: no attempt left


@dataclass(frozen=True, slots=True)
class Snoozed:
    """A snoozed attempt, to be written: due again after ``delay`` seconds, uncounted."""

    job: ClaimedJob
    delay: float


@dataclass(frozen=True, slots=True)
class Sleep:
    """A durable sleep, to be written: the job waits until ``until``, uncounted."""

    job: ClaimedJob
    until: datetime


@dataclass(frozen=True, slots=True)
class ProgressReport:
    job: ClaimedJob
    fraction: float | None
    message: str | None


@dataclass(frozen=True, slots=True)
class LogChunk:
    """Lines a running attempt logged, not written yet, to append to its log."""

    job: ClaimedJob
    text: str
    truncated: bool  # the attempt reached its bound: nothing follows


@dataclass(frozen=True, slots=True)
class Renewal:
    """What a heartbeat found: leases it could not renew (the jobs were taken from this
    worker), and jobs asked to stop (their NOTIFY may have been missed)."""

    lost: list[ClaimedJob]
    cancel_requested: list[int]


@dataclass(frozen=True, slots=True)
class LastOutcome:
    """A job as a refused outcome over HTTP asks after it (outcome_applied.sql): its
    status, the token of its last claim, and its last attempt's row, if any."""

    status: str
    claim_token: int | None
    last_error: str | None
    retry_in: float
    attempt_worker: str | None
    attempt_error: str | None


@dataclass(frozen=True, slots=True)
class RememberedKey:
    """An idempotency key as stored: the hash of the request that took it, the id of
    the job it answered with, and that job (None once retention deleted it)."""

    request_hash: bytes
    job_id: int
    job: Job | None


@dataclass(frozen=True, slots=True)
class Rescued:
    id: int
    status: str  # pending again, failed (no attempt left) or cancelled (as asked)
    attempts: int
    max_attempts: int
    queue: str
    type: str


@dataclass(frozen=True, slots=True)
class Cancelled:
    id: int
    status: str  # cancelled at once (it was pending), or still running, asked to stop


@dataclass(frozen=True, slots=True)
class MinuteRow:
    """A bucket of the per-minute series (migrations 0017, 0018): jobs that finished in
    it, and the worst queue's wait percentiles (seconds; None when no job finished)."""

    at: datetime
    completed: int
    failed: int
    wait_p50: float | None
    wait_p95: float | None


@dataclass(frozen=True, slots=True)
class NodeState:
    """A workflow job's place in its workflow, as stored with it (migration 0019)."""

    ref: str
    status: str  # pending (no parents) or blocked
    parents: int
    on_failure: str  # cancel | continue
    run_if: str  # completed | finished | failed


@dataclass(frozen=True, slots=True)
class WorkflowRow:
    id: int
    name: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class WorkflowCounts:
    """A workflow's row, with how many of its jobs are in each state."""

    id: int
    name: str | None
    created_at: datetime
    blocked: int
    pending: int
    running: int
    completed: int
    failed: int
    cancelled: int
    waiting: int


@dataclass(frozen=True, slots=True)
class ParentResult:
    """A parent of a workflow job, as its handler sees it."""

    ref: str
    status: str
    result: Any
