"""Job control: retrying failed and cancelled jobs, cancelling pending and running ones,
one by id or all that match a filter, in batches."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from jobqueue.db.store import Store
from jobqueue.job import FINAL_STATES, RETRYABLE_STATES, Job, JobNotFound, JobStateError, JobStatus
from jobqueue.observability import lifecycle

# Jobs per statement of a bulk retry or cancel: each batch locks this many rows, briefly.
BATCH = 1000


async def retry(store: Store, job_id: int) -> Job:
    """See JobQueue.retry."""
    async with store.transaction() as tx:
        retried = await tx.retry_jobs(job_id=job_id, states=sorted(RETRYABLE_STATES), limit=1)
        # In the same transaction: the row as retried, before a worker can claim it.
        job = await tx.get_job(job_id=job_id)
    if job is None:
        raise JobNotFound(job_id)
    if not retried:
        raise JobStateError(job, "retry", "failed or cancelled")
    return job


async def retry_many(
    store: Store,
    *,
    type: str | None,
    queue: str | None,
    finished_after: datetime | None,
    finished_before: datetime | None,
    statuses: Iterable[JobStatus | str],
) -> int:
    """See JobQueue.retry_many."""
    wanted = sorted({JobStatus(s) for s in statuses})
    if not wanted or not set(wanted) <= RETRYABLE_STATES:
        raise ValueError("statuses: only failed and cancelled jobs can be retried")
    total = 0
    while True:
        retried = await store.retry_jobs(
            type=type,
            queue=queue,
            finished_after=finished_after,
            finished_before=finished_before,
            states=wanted,
            limit=BATCH,
        )
        total += len(retried)
        if len(retried) < BATCH:
            return total


async def cancel(store: Store, job_id: int) -> Job:
    """See JobQueue.cancel."""
    async with store.transaction() as tx:
        cancelled = await tx.cancel_jobs(job_id=job_id, limit=1)
        job = await tx.get_job(job_id=job_id)
    if job is None:
        raise JobNotFound(job_id)
    if cancelled and cancelled[0].status == JobStatus.CANCELLED:
        lifecycle.cancelled_pending(job.id, type=job.type, queue=job.queue)
    if job.status in FINAL_STATES and not (
        job.status == JobStatus.CANCELLED and job.cancel_requested_at is not None
    ):
        raise JobStateError(job, "cancel", "pending or running")
    return job


async def cancel_many(store: Store, *, type: str | None, queue: str | None) -> dict[str, int]:
    """See JobQueue.cancel_many."""
    counts = {"cancelled": 0, "requested": 0}
    while True:
        jobs = await store.cancel_jobs(type=type, queue=queue, limit=BATCH)
        for job in jobs:
            counts["cancelled" if job.status == "cancelled" else "requested"] += 1
            if job.status == "cancelled":
                lifecycle.cancelled_pending(job.id)
        if len(jobs) < BATCH:
            return counts
