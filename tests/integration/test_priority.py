"""Priorities: lower runs first, and aging keeps a low priority from starving."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.maintenance.aging import Aging
from jobqueue.model.job import JobStatus
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio


async def test_claim_order_is_priority_then_run_at_then_id(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    order: list[str] = []

    @jq.task("x")
    async def x(payload: dict[str, Any]) -> None:
        order.append(payload["name"])

    await jq.enqueue("x", {"name": "p5"}, priority=5)
    await jq.enqueue("x", {"name": "p0-second"}, priority=0)
    await jq.enqueue("x", {"name": "p-1"}, priority=-1)
    await jq.enqueue("x", {"name": "p0-third"}, priority=0)
    last = await jq.enqueue("x", {"name": "p9"}, priority=9)
    await start_worker(worker_count=1)
    await jq.wait(last.id, timeout=15)
    assert order == ["p-1", "p0-second", "p0-third", "p5", "p9"]


async def test_aging_moves_only_jobs_waiting_behind_better_priorities(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type, queue, priority, run_at, updated_at) VALUES
            ('x', 'mixed', 5, now() - interval '10 minutes', now() - interval '10 minutes'),
            ('x', 'mixed', 0, now(), now()),
            ('x', 'flat', 3, now() - interval '10 minutes', now() - interval '10 minutes'),
            ('x', 'flat', 3, now() - interval '9 minutes', now() - interval '9 minutes')"""
    )
    aging = Aging(await jq.store(), step_seconds=60)
    assert await aging.run_once() == 1
    assert await aging.run_once() == 0  # one step per 60 s of waiting, not per run
    rows = await db.fetch(f'SELECT queue, priority FROM "{schema}".jobs ORDER BY id')
    assert [tuple(r) for r in rows] == [("mixed", 4), ("mixed", 0), ("flat", 3), ("flat", 3)]


async def test_a_low_priority_job_is_not_starved_by_a_stream_of_urgent_ones(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("urgent")
    async def urgent(payload: dict[str, Any]) -> None:
        await jq.enqueue("urgent", priority=0)  # there is always another urgent job
        await asyncio.sleep(0.01)

    @jq.task("report")
    async def report(payload: dict[str, Any]) -> None:
        pass

    await jq.enqueue_many("urgent", [{}] * 3, priority=0)
    low = await jq.enqueue("report", priority=3)
    started = time.monotonic()
    await start_worker(worker_count=1, priority_aging=0.3, rescue_interval=0.05)
    done = await jq.wait(low.id, timeout=15)
    assert done.status == JobStatus.COMPLETED
    # Four steps of 0.3 s bring priority 3 level with 0, where it is the oldest.
    assert time.monotonic() - started < 6
    assert done.priority <= 0


async def test_without_aging_strict_priorities_starve(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("urgent")
    async def urgent(payload: dict[str, Any]) -> None:
        await jq.enqueue("urgent", priority=0)
        await asyncio.sleep(0.01)

    await jq.enqueue_many("urgent", [{}] * 3, priority=0)
    low = await jq.enqueue("report", priority=3)
    worker = await start_worker(worker_count=1, priority_aging=None, rescue_interval=0.05)
    # A hundred urgent jobs, over a second: aging at 0.3 s steps would have let it in.
    ran = await worker.executor.signals.started.times(100, timeout=30)
    assert low.id not in ran
    assert (await jq.get(low.id)).status == JobStatus.PENDING  # type: ignore[union-attr]


async def test_a_scheduled_job_starts_at_its_time_within_the_poll_interval(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    from datetime import UTC, datetime, timedelta

    started_at: list[datetime] = []

    @jq.task("at")
    async def at(payload: dict[str, Any]) -> None:
        started_at.append(datetime.now(UTC))

    await start_worker(poll_interval=0.25)
    when = datetime.now(UTC) + timedelta(seconds=0.8)
    by_time = await jq.enqueue("at", run_at=when)
    by_delay = await jq.enqueue("at", delay_seconds=0.8)
    await jq.wait(by_time.id, timeout=15)
    await jq.wait(by_delay.id, timeout=15)
    # No NOTIFY announces a job that is not due yet: the poll finds it.
    for started in started_at:
        assert started >= when - timedelta(milliseconds=50)  # never early (clock skew aside)
        assert started <= when + timedelta(seconds=0.25 + 0.5)
