"""jobqueue: a background job service on PostgreSQL."""

from jobqueue.app import JobQueue
from jobqueue.context import JobContext
from jobqueue.model.errors import (
    DatabaseUnavailable,
    EnqueueError,
    EnqueueFailed,
    EnqueueOutcomeUnknown,
)
from jobqueue.model.job import Attempt, Job, JobStatus
from jobqueue.retry import Discard, ExponentialBackoff, FixedDelay, RetryAt, Snooze
from jobqueue.task import PayloadError, Task

__all__ = [
    "Attempt",
    "DatabaseUnavailable",
    "Discard",
    "EnqueueError",
    "EnqueueFailed",
    "EnqueueOutcomeUnknown",
    "ExponentialBackoff",
    "FixedDelay",
    "Job",
    "JobContext",
    "JobQueue",
    "JobStatus",
    "PayloadError",
    "RetryAt",
    "Snooze",
    "Task",
]
