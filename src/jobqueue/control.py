"""Job and queue control: retrying failed and cancelled jobs, cancelling pending and
running ones, one by id or all that match a filter, in batches; pausing and resuming
queues. Given who acts (``by``), each action writes its audit row in its own
transaction (jobqueue.audit), refusals included."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sized
from datetime import datetime
from typing import Any, TypeVar

from jobqueue import audit
from jobqueue.audit import Action, Actor
from jobqueue.db.store import Store
from jobqueue.model.job import (
    FINAL_STATES,
    RETRYABLE_STATES,
    Job,
    JobNotFound,
    JobStateError,
    JobStatus,
    QueueInfo,
)
from jobqueue.model.limits import changes_from, parse_entries
from jobqueue.observability import lifecycle

B = TypeVar("B", bound=Sized)

# Jobs per statement of a bulk retry or cancel: each batch locks this many rows, briefly.
BATCH = 1000
# A cancel of one job whose row another transaction holds tries again every
# LOCKED_RETRY_SECONDS, for up to LOCKED_WAIT_SECONDS: a claim or a completion holds
# it for milliseconds; a transaction that holds it longer gets the job as it is.
LOCKED_RETRY_SECONDS = 0.01
LOCKED_WAIT_SECONDS = 5.0


async def retry(store: Store, job_id: int, *, by: Actor | None = None) -> Job:
    """See JobQueue.retry."""
    async with store.transaction() as tx:
        retried = await tx.retry_jobs(job_id=job_id, states=sorted(RETRYABLE_STATES), limit=1)
        # In the same transaction: the row as retried, before a worker can claim it.
        job = await tx.get_job(job_id=job_id)
        if by is not None:
            result = audit.OK if retried else refusal(job)
            await audit.record_as(
                tx, by, Action.JOB_RETRY, target=job_id, count=len(retried), result=result
            )
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
    by: Actor | None = None,
) -> int:
    """See JobQueue.retry_many."""
    wanted = sorted({JobStatus(s) for s in statuses})
    if not wanted or not set(wanted) <= RETRYABLE_STATES:
        raise ValueError("statuses: only failed and cancelled jobs can be retried")
    where = given(
        type=type,
        queue=queue,
        finished_after=finished_after,
        finished_before=finished_before,
        statuses=wanted,
    )

    async def batch(tx: Store) -> list[int]:
        return await tx.retry_jobs(
            type=type,
            queue=queue,
            finished_after=finished_after,
            finished_before=finished_before,
            states=wanted,
            limit=BATCH,
        )

    total = 0
    async for retried in audited_batches(store, batch, by, Action.JOBS_RETRY, where):
        total += len(retried)
    return total


async def cancel(store: Store, job_id: int, *, by: Actor | None = None) -> Job:
    """See JobQueue.cancel."""
    deadline = time.monotonic() + LOCKED_WAIT_SECONDS
    while True:
        async with store.transaction() as tx:
            cancelled = await tx.cancel_jobs(job_id=job_id, limit=1)
            job = await tx.get_job(job_id=job_id)
            # The statement passes over a row another transaction holds (SKIP LOCKED,
            # for bulk cancels): a claim or a completion of this very job, which
            # commits within milliseconds. Answering then would say the job was asked
            # to stop when nothing was done; so try again once that has committed.
            again = not cancelled and passed_over(job) and time.monotonic() < deadline
            if by is not None and not again:
                result = refusal(job) if job is None or has_ended(job) else audit.OK
                await audit.record_as(
                    tx, by, Action.JOB_CANCEL, target=job_id, count=len(cancelled), result=result
                )
        if not again:
            break
        await asyncio.sleep(LOCKED_RETRY_SECONDS)
    if job is None:
        raise JobNotFound(job_id)
    if cancelled and cancelled[0].status == JobStatus.CANCELLED:
        lifecycle.cancelled_pending(job.id, type=job.type, queue=job.queue)
    if has_ended(job):
        raise JobStateError(job, "cancel", "pending or running")
    return job


def passed_over(job: Job | None) -> bool:
    """A job that a cancel should have changed but did not: its row was locked."""
    return (
        job is not None
        and job.status in (JobStatus.PENDING, JobStatus.RUNNING)
        and job.cancel_requested_at is None
    )


def has_ended(job: Job) -> bool:
    """Ended otherwise than by a cancel: too late to cancel it. A cancelled job stays
    cancelled, and cancelling it again changes nothing."""
    return job.status in FINAL_STATES and not (
        job.status == JobStatus.CANCELLED and job.cancel_requested_at is not None
    )


async def cancel_many(
    store: Store, *, type: str | None, queue: str | None, by: Actor | None = None
) -> dict[str, int]:
    """See JobQueue.cancel_many."""

    async def batch(tx: Store) -> list[Any]:
        return await tx.cancel_jobs(type=type, queue=queue, limit=BATCH)

    counts = {"cancelled": 0, "requested": 0}
    where = given(type=type, queue=queue)
    async for jobs in audited_batches(store, batch, by, Action.JOBS_CANCEL, where):
        for job in jobs:
            counts["cancelled" if job.status == "cancelled" else "requested"] += 1
            if job.status == "cancelled":
                lifecycle.cancelled_pending(job.id)
    return counts


async def queues(store: Store, live_seconds: float) -> list[QueueInfo]:
    """See JobQueue.queues: each with its limits, and its jobs no live worker handles."""
    limits = await store.queue_limits_overview()
    found = [
        dataclasses.replace(q, limits=limits[q.name]) if q.name in limits else q
        for q in await store.queues_overview()
    ]
    return await with_unhandled(store, found, live_seconds)


async def queue(store: Store, name: str, live_seconds: float) -> QueueInfo:
    """See JobQueue.queue: zeros for a queue with no job and no control."""
    found = await store.queues_overview(name=name)
    info = found[0] if found else QueueInfo(name, 0, 0, 0, 0, 0, False, None, None)
    limits = await store.queue_limits_overview(name=name)
    info = dataclasses.replace(info, limits=limits[name]) if name in limits else info
    [info] = await with_unhandled(store, [info], live_seconds)
    return info


async def with_unhandled(
    store: Store, queues: list[QueueInfo], live_seconds: float
) -> list[QueueInfo]:
    """``queues`` with their pending jobs that wait for a handler: of a type that no
    worker serving the queue, heartbeating within ``live_seconds``, would claim
    (queue_unhandled.sql)."""
    unhandled: dict[str, int] = {}
    for queue, _type, count in await store.queue_unhandled(within_seconds=live_seconds):
        unhandled[queue] = unhandled.get(queue, 0) + count
    return [
        dataclasses.replace(q, unhandled=unhandled[q.name]) if q.name in unhandled else q
        for q in queues
    ]


async def pause(store: Store, name: str, *, by: Actor | None = None) -> None:
    """See JobQueue.pause."""
    async with store.transaction() as tx:
        await tx.queue_pause(name=name)
        if by is not None:
            await audit.record_as(tx, by, Action.QUEUE_PAUSE, target=name)


async def resume(store: Store, name: str, *, by: Actor | None = None) -> None:
    """See JobQueue.resume."""
    async with store.transaction() as tx:
        await tx.queue_resume(name=name)
        if by is not None:
            await audit.record_as(tx, by, Action.QUEUE_RESUME, target=name)


def refusal(job: Job | None) -> str:
    return audit.NOT_FOUND if job is None else audit.conflict(job.status)


def given(**filters: object) -> dict[str, object]:
    """The filters a bulk action was given, as its audit row records them."""
    return {
        name: value.isoformat() if isinstance(value, datetime) else value
        for name, value in filters.items()
        if value is not None
    }


async def audited_batches(
    store: Store,
    batch: Callable[[Store], Awaitable[B]],
    by: Actor | None,
    action: Action,
    where: dict[str, object],
) -> AsyncIterator[B]:
    """Each batch of a bulk action, one transaction each, until one comes back short.
    The action's one audit row is written with the first batch and its count grows in
    each batch's transaction: whatever was committed is counted, even if a later batch
    fails."""
    entry: int | None = None
    while True:
        async with store.transaction() as tx:
            done = await batch(tx)
            if by is not None and entry is None:
                entry = await audit.record_as(tx, by, action, filter=where, count=len(done))
            elif entry is not None and len(done):
                await tx.audit_count(entry_id=entry, add=len(done))
        yield done
        if len(done) < BATCH:
            return


# Queue limits (docs/limits.md): set in one transaction with their audit row.


async def declare(store: Store, entries: str) -> None:
    """Write the limits JOBQUEUE_LIMITS declares (already checked by config)."""
    for queue, given in parse_entries(entries).items():
        await set_limits(store, queue, given)


async def set_limits(
    store: Store, name: str, given: Mapping[str, Any], *, by: Actor | None = None
) -> None:
    """Set the limits ``given`` names (None removes one) on queue ``name``, whether or
    not it has jobs; ValueError naming the field if one is wrong (nothing is stored)."""
    changes = changes_from(given)
    async with store.transaction() as tx:
        await tx.queue_limits_set(name=name, columns=json.dumps(changes.columns()))
        if by is not None:
            await audit.record_as(
                tx, by, Action.QUEUE_LIMITS, target=name, filter=changes.as_json()
            )
