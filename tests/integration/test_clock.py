"""The store's clock: set, it is the "now" of every query, so a test moves time
instead of sleeping through it. Unset, the database's own time is used."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobqueue.app import JobQueue
from jobqueue.context import JobContext
from jobqueue.db.query_base import Clock
from jobqueue.maintenance.rescuer import Rescuer
from jobqueue.maintenance.retention import Retention
from jobqueue.model.job import JobStatus
from jobqueue.testing import drain

pytestmark = pytest.mark.anyio

DAY = 86_400.0


async def test_a_scheduled_job_is_claimed_once_the_clock_reaches_it(jq: JobQueue) -> None:
    store = await jq.store()
    job = await jq.enqueue("report", delay_seconds=3600)
    claim = {"queue": "default", "limit": 10, "worker_id": "w", "lease_seconds": 30}
    assert await store.claim(**claim) == []
    jq.clock.set(job.run_at - timedelta(seconds=1))
    assert await store.claim(**claim) == []
    jq.clock.advance(1)
    assert [claimed.id for claimed in await store.claim(**claim)] == [job.id]


async def test_a_lease_runs_out_when_the_clock_passes_it(jq: JobQueue) -> None:
    store = await jq.store()
    job = await jq.enqueue("report", max_attempts=2)
    now = await store.clock_now()
    jq.clock.set(now)
    await store.claim(queue="default", limit=1, worker_id="w", lease_seconds=30)
    rescuer = Rescuer(store, lease_seconds=30)
    jq.clock.advance(29)
    assert await rescuer.run_once() == 0
    jq.clock.advance(2)
    assert await rescuer.run_once() == 1
    rescued = await jq.get(job.id)
    assert rescued is not None
    assert (rescued.status, rescued.attempts) == (JobStatus.PENDING, 1)
    assert rescued.last_error == "worker lost (lease expired)"
    assert rescued.run_at == now + timedelta(seconds=31)  # at once, by the clock


async def test_retention_deletes_a_job_once_its_period_has_passed(jq: JobQueue) -> None:
    store = await jq.store()
    job = await jq.enqueue("report")
    claimed = await store.claim(queue="default", limit=1, worker_id="w", lease_seconds=30)
    await store.complete(jobs=claimed, worker_id="w", status=JobStatus.COMPLETED)
    finished_at = (await jq.get(job.id)).finished_at  # type: ignore[union-attr]
    assert finished_at is not None
    retention = Retention(store, retain_completed=DAY, retain_failed=None)
    jq.clock.set(finished_at + timedelta(seconds=DAY - 1))
    assert await retention.run_once() == 0
    jq.clock.advance(2)
    assert await retention.run_once() == 1
    assert await jq.get(job.id) is None


async def test_drain_runs_a_retry_once_the_clock_reaches_it(jq: JobQueue) -> None:
    @jq.task("flaky", retry=lambda attempt: 3600)
    async def flaky(payload: dict[str, Any], ctx: JobContext) -> str:
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")
        return "done"

    job = await jq.enqueue("flaky")
    [first] = await drain(jq)
    assert (first.status, first.attempts) == (JobStatus.PENDING, 1)
    jq.clock.set(first.run_at)  # an hour on, without waiting for it
    [second] = await drain(jq)
    assert (second.id, second.status, second.result) == (job.id, JobStatus.COMPLETED, "done")


def test_the_clock_takes_aware_times_and_is_unset_by_default() -> None:
    clock = Clock()
    assert clock.now() is None
    with pytest.raises(ValueError, match="aware"):
        clock.set(datetime(2026, 1, 1))
    with pytest.raises(RuntimeError, match="set the clock"):
        clock.advance(1)
    clock.set(datetime(2026, 1, 1, tzinfo=UTC))
    clock.advance(60)
    assert clock.now() == datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    clock.reset()
    assert clock.now() is None
