"""jobqueue: a background job service on PostgreSQL."""

from jobqueue.app import JobQueue, Task
from jobqueue.context import JobContext
from jobqueue.job import Attempt, Job, JobStatus
from jobqueue.retry import Discard, ExponentialBackoff, FixedDelay, RetryAt

__all__ = [
    "Attempt",
    "Discard",
    "ExponentialBackoff",
    "FixedDelay",
    "Job",
    "JobContext",
    "JobQueue",
    "JobStatus",
    "RetryAt",
    "Task",
]
