"""The dashboard's reads of pending jobs by when they run: the counts of jobs due later
(scheduled, retrying), bounded; a queue's waiting jobs in the order workers take
them; and the jobs list's views by run-at. Time moves by the store's clock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobqueue.app import JobQueue
from jobqueue.model.job import JobStatus
from jobqueue.model.search import JobFilter

pytestmark = pytest.mark.anyio


async def test_due_later_is_counted_by_kind_up_to_the_bound_and_moves_with_time(
    jq: JobQueue,
) -> None:
    store = await jq.store()
    now = await store.clock_now()
    store.clock.set(now)
    hour = now + timedelta(hours=1)
    scheduled = [await jq.enqueue("report", run_at=hour, priority=p) for p in (0, 5, 5)]
    due = await jq.enqueue("report", priority=3)
    await jq.enqueue("report", queue="mail", run_at=hour)
    # A failed attempt waiting to retry: what fail.sql leaves, an attempt made and
    # run_at in the future.
    retrying = await jq.enqueue("report", priority=5)
    await (await jq.pool()).execute(
        f'UPDATE "{store.schema}".jobs SET attempts = 1, run_at = $2 WHERE id = $1',
        retrying.id,
        hour + timedelta(minutes=1),
    )

    counted = await store.queues_later(queues=["default", "mail", "idle"], limit=100)
    assert counted == {"default": (3, 1), "mail": (1, 0)}
    bounded = await store.queues_later(queues=["default"], limit=2)
    assert sum(bounded["default"]) == 2

    page = await jq.inspect.jobs(JobFilter(JobStatus.PENDING, queues=["default"], due="scheduled"))
    assert [j.id for j in page.jobs] == [j.id for j in reversed(scheduled)]
    page = await jq.inspect.jobs(JobFilter(JobStatus.PENDING, due="retrying"))
    assert [j.id for j in page.jobs] == [retrying.id]
    page = await jq.inspect.jobs(JobFilter(JobStatus.PENDING, due="due"))
    assert [j.id for j in page.jobs] == [due.id]

    # Workers take the due job first, then the others as they fall due, soonest first.
    waiting = await store.queue_waiting(queue="default", limit=10)
    assert [j.id for j in waiting] == [due.id, *(j.id for j in scheduled), retrying.id]
    assert [j.id for j in await store.queue_waiting(queue="default", limit=2)] == [
        due.id,
        scheduled[0].id,
    ]

    # An hour on, the scheduled jobs are due; the retrying one a minute later.
    store.clock.set(hour)
    assert await store.queues_later(queues=["default"], limit=100) == {"default": (0, 1)}
    waiting = await store.queue_waiting(queue="default", limit=10)
    assert [j.id for j in waiting] == [
        scheduled[0].id, due.id, scheduled[1].id, scheduled[2].id, retrying.id,
    ]  # fmt: skip
    store.clock.set(hour + timedelta(minutes=2))
    assert await store.queues_later(queues=["default"], limit=100) == {}


async def test_the_running_jobs_are_listed_by_worker(jq: JobQueue) -> None:
    store = await jq.store()
    jobs = [await jq.enqueue("report") for _ in range(3)]
    await store.claim(queue="default", limit=2, worker_id="w-b", lease_seconds=30)
    await store.claim(queue="default", limit=1, worker_id="w-a", lease_seconds=30)
    running = await store.workers_jobs(limit=10)
    assert [(j.worker_id, j.status) for j in running] == [
        ("w-a", "running"),
        ("w-b", "running"),
        ("w-b", "running"),
    ]
    assert sorted(j.id for j in running) == [j.id for j in jobs]
    assert len(await store.workers_jobs(limit=2)) == 2
