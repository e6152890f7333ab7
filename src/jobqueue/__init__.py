"""jobqueue: a background job service on PostgreSQL."""

from jobqueue.app import JobQueue, Task
from jobqueue.context import JobContext
from jobqueue.job import Job, JobStatus

__all__ = ["Job", "JobContext", "JobQueue", "JobStatus", "Task"]
