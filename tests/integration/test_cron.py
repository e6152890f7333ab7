"""Periodic jobs: one job per tick across any number of leaders, in the schedule's time
zone, missed ticks not replayed; declared on a task or in JOBQUEUE_CRON."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.cron import Schedule
from jobqueue.maintenance.scheduler import Scheduler
from jobqueue.model.job import JobStatus
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio

OPTIONS = ("default", 0, 3)  # queue, priority, max_attempts


async def jobs(db: asyncpg.Connection, schema: str) -> list[asyncpg.Record]:
    rows: list[asyncpg.Record] = await db.fetch(
        f'SELECT type, run_at, payload FROM "{schema}".jobs ORDER BY id'
    )
    return rows


async def test_each_tick_is_one_job_whatever_the_number_of_leaders(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    every_5 = Schedule("report", "*/5 * * * *")
    now = datetime(2026, 11, 29, 12, 3, 20, tzinfo=UTC)
    leaders = [Scheduler(await jq.store(), [(every_5, OPTIONS)]) for _ in range(5)]
    created = await asyncio.gather(*(leader.run_once(now) for leader in leaders))
    assert sum(created) == 1
    assert await leaders[0].run_once(now + timedelta(minutes=1)) == 0  # the same tick
    assert await leaders[1].run_once(now + timedelta(minutes=2)) == 1  # 12:05
    rows = await jobs(db, schema)
    assert [r["run_at"] for r in rows] == [
        datetime(2026, 11, 29, 12, 0, tzinfo=UTC),
        datetime(2026, 11, 29, 12, 5, tzinfo=UTC),
    ]
    assert json.loads(rows[0]["payload"]) == {"tick": "2026-11-29T12:00:00+00:00"}


async def test_ticks_follow_the_time_zone_and_old_missed_ones_are_skipped(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    nine_in_paris = Schedule("report", "0 9 * * *", "Europe/Paris")
    leader = Scheduler(await jq.store(), [(nine_in_paris, OPTIONS)])
    # 08:30 UTC is 09:30 in Paris: the 09:00 tick, half an hour ago, runs once.
    assert await leader.run_once(datetime(2026, 11, 29, 8, 30, tzinfo=UTC)) == 1
    # Down all the next day until 15:00: that day's 09:00 tick is six hours old, skipped.
    later = Scheduler(await jq.store(), [(nine_in_paris, OPTIONS)])
    assert await later.run_once(datetime(2026, 11, 30, 14, 0, tzinfo=UTC)) == 0
    [row] = await jobs(db, schema)
    assert row["run_at"] == datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
    assert json.loads(row["payload"]) == {"tick": "2026-11-29T09:00:00+01:00"}


async def test_a_task_with_cron_runs_on_its_schedule_under_two_workers(
    jq: JobQueue, start_worker: StartWorker, db: asyncpg.Connection, schema: str
) -> None:
    ticks: list[str] = []
    ticked = asyncio.Event()

    @jq.task("heartbeat_report", cron="* * * * *")
    async def report(payload: dict[str, Any]) -> None:
        ticks.append(payload["tick"])
        ticked.set()

    workers = [await start_worker(rescue_interval=0.1) for _ in range(2)]
    await asyncio.wait_for(ticked.wait(), 10)
    # Three more maintenance rounds on each worker: the leader's scheduler has run again,
    # twice at least since the tick's job ran, and made no second job for the tick.
    for worker in workers:
        worker.leader.signals.ran.clear()
    rounds = await asyncio.gather(*(w.leader.signals.ran.times(3) for w in workers))
    assert [True, True, True] in rounds, rounds
    [row] = await db.fetch(f'SELECT id FROM "{schema}".jobs')
    assert (await jq.wait(row["id"], timeout=15)).status == JobStatus.COMPLETED
    assert len(ticks) == 1
