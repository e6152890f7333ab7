"""Schedules' ticks (jobqueue.schedules.runner): one job per tick across any number of
leaders, in the schedule's time zone, missed ticks by each schedule's ``missed``; the
schedules declared in code (on a task or in JOBQUEUE_CRON) written to the table by
the leader, kept paused when paused, and deleted once the code no longer has them."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.cron import Schedule
from jobqueue.enqueue.rows import Rows
from jobqueue.model.schedules import ScheduleConflict
from jobqueue.schedules.runner import ScheduleRunner
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio

OPTIONS = ("default", 0, 3)  # queue, priority, max_attempts


async def jobs(db: asyncpg.Connection, schema: str) -> list[asyncpg.Record]:
    rows: list[asyncpg.Record] = await db.fetch(
        f'SELECT type, run_at, payload FROM "{schema}".jobs ORDER BY run_at, id'
    )
    return rows


async def runner(jq: JobQueue, *code: Schedule) -> ScheduleRunner:
    return ScheduleRunner(
        await jq.store(), Rows(jq.tasks, jq.settings), [(s, OPTIONS) for s in code]
    )


async def test_each_tick_is_one_job_whatever_the_number_of_leaders(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    jq.clock.set(datetime(2026, 11, 29, 12, 3, 20, tzinfo=UTC))
    await jq.schedules.create("report", "report", cron="*/5 * * * *", payload={"id": 7})
    leaders = [await runner(jq) for _ in range(5)]
    jq.clock.set(datetime(2026, 11, 29, 12, 5, 0, 200_000, tzinfo=UTC))
    created = await asyncio.gather(*(leader.run_once() for leader in leaders))
    assert sum(created) == 1
    assert await leaders[0].run_once() == 0  # the same tick
    jq.clock.set(datetime(2026, 11, 29, 12, 10, 1, tzinfo=UTC))
    assert sum(await asyncio.gather(*(leader.run_once() for leader in leaders))) == 1
    rows = await jobs(db, schema)
    assert [r["run_at"] for r in rows] == [
        datetime(2026, 11, 29, 12, 5, tzinfo=UTC),
        datetime(2026, 11, 29, 12, 10, tzinfo=UTC),
    ]
    assert [json.loads(r["payload"]) for r in rows] == [{"id": 7}] * 2
    shown = await jq.schedules.get("report")
    assert shown.next_run_at == datetime(2026, 11, 29, 12, 15, tzinfo=UTC)
    assert shown.last_run_at == datetime(2026, 11, 29, 12, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("missed", "expected"),
    [
        ("skip", 0),  # the last missed tick is two minutes late: skipped
        ("once", 1),  # the latest, once
        ("all", 6),  # every hour from 13:00 to 18:00
    ],
)
async def test_ticks_missed_while_no_leader_ran_follow_the_schedules_missed(
    jq: JobQueue, db: asyncpg.Connection, schema: str, missed: str, expected: int
) -> None:
    jq.clock.set(datetime(2026, 11, 29, 12, 0, 30, tzinfo=UTC))
    await jq.schedules.create("hourly", "report", cron="0 * * * *", missed=missed)
    leader = await runner(jq)
    jq.clock.set(datetime(2026, 11, 29, 18, 2, 0, tzinfo=UTC))
    await leader.run_once()
    rows = await jobs(db, schema)
    assert len(rows) == expected
    if rows:  # the latest missed ticks, up to the last before now
        assert rows[-1]["run_at"] == datetime(2026, 11, 29, 18, 0, tzinfo=UTC)
    shown = await jq.schedules.get("hourly")
    assert shown.next_run_at == datetime(2026, 11, 29, 19, 0, tzinfo=UTC)


async def test_a_late_tick_still_runs_under_skip_and_an_interval_keeps_its_phase(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    start = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
    jq.clock.set(start)
    await jq.schedules.create("every-10s", "poll", every="10s")
    leader = await runner(jq)
    jq.clock.set(start + timedelta(seconds=10 + 45))  # ticks 12:00:10 ... 12:00:50 due
    assert await leader.run_once() == 1  # the latest, 5 s late: on time for `skip`
    [row] = await jobs(db, schema)
    assert row["run_at"] == start + timedelta(seconds=50)
    assert (await jq.schedules.get("every-10s")).next_run_at == start + timedelta(seconds=60)


async def test_ticks_follow_the_time_zone_and_code_schedules_get_their_tick_as_payload(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    nine_in_paris = Schedule("report", "0 9 * * *", "Europe/Paris")
    jq.clock.set(datetime(2026, 11, 29, 7, 30, tzinfo=UTC))
    leader = await runner(jq, nine_in_paris)
    assert await leader.run_once() == 0  # written, first tick 09:00 Paris, 08:00 UTC
    shown = await jq.schedules.get("report")
    assert (shown.source, shown.payload, shown.missed) == ("code", None, "once")
    assert shown.next_run_at == datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
    jq.clock.set(datetime(2026, 11, 29, 8, 0, 1, tzinfo=UTC))
    assert await leader.run_once() == 1
    [row] = await jobs(db, schema)
    assert json.loads(row["payload"]) == {"tick": "2026-11-29T09:00:00+01:00"}


async def test_code_schedules_are_written_again_by_a_new_leader_paused_ones_kept_paused(
    jq: JobQueue,
) -> None:
    jq.clock.set(datetime(2026, 11, 29, 7, 30, tzinfo=UTC))
    await jq.schedules.create("mine", "report", every="1h")
    first = await runner(jq, Schedule("report", "0 9 * * *"), Schedule("mine", "0 1 * * *"))
    await first.run_once()
    names = {s.name: s.source for s in await jq.schedules.list()}
    # A name taken by a schedule made over HTTP keeps that one.
    assert names == {"mine": "api", "report": "code"}
    with pytest.raises(ScheduleConflict, match="declared in code"):
        await jq.schedules.update("report", cron="0 10 * * *")
    await jq.schedules.pause("report")

    # A new leader with other code: the changed timing is written, paused it stays.
    second = await runner(jq, Schedule("report", "30 9 * * *"), Schedule("cleanup", "*/5 * * * *"))
    await second.run_once()
    report = await jq.schedules.get("report")
    assert (report.cron, report.enabled, report.next_run_at) == (
        "30 9 * * *", False, datetime(2026, 11, 29, 9, 30, tzinfo=UTC),
    )  # fmt: skip
    # The code no longer declares one: deleted. One made over HTTP is never touched.
    third = await runner(jq, Schedule("cleanup", "*/5 * * * *"))
    await third.run_once()
    assert sorted(s.name for s in await jq.schedules.list()) == ["cleanup", "mine"]


async def test_a_task_with_cron_is_written_by_the_leading_worker_and_ticks_run(
    jq: JobQueue, start_worker: StartWorker, db: asyncpg.Connection, schema: str
) -> None:
    ran: list[dict[str, Any]] = []
    done = asyncio.Event()

    @jq.task("heartbeat_report", cron="* * * * *")
    async def report(payload: dict[str, Any]) -> None:
        ran.append(payload)
        done.set()

    await asyncio.gather(*(start_worker(rescue_interval=0.1) for _ in range(2)))
    deadline = asyncio.get_running_loop().time() + 10
    while not [s for s in await jq.schedules.list() if s.name == "heartbeat_report"]:
        assert asyncio.get_running_loop().time() < deadline, "not written by the leader"
        await asyncio.sleep(0.05)
    shown = await jq.schedules.get("heartbeat_report")
    assert shown.source == "code"
    assert shown.next_run_at.second == 0
    # Made due now, as a minute's tick would be: the leader runs it, once.
    await db.execute(
        f'UPDATE "{schema}".schedules SET next_run_at = now() WHERE name = $1', "heartbeat_report"
    )
    await asyncio.wait_for(done.wait(), 10)
    [row] = await db.fetch(f'SELECT id FROM "{schema}".jobs')
    assert (await jq.wait(row["id"], timeout=15)).status == "completed"
    assert len(ran) == 1
    assert set(ran[0]) == {"tick"}


async def test_several_schedules_run_one_type_each_with_its_own_payload(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    jq.clock.set(datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC))
    await jq.schedules.create("acme", "invoice", every="1h", payload={"customer": "acme"})
    await jq.schedules.create("globex", "invoice", every="1h", payload={"customer": "globex"})
    leader = await runner(jq)
    jq.clock.set(datetime(2026, 11, 29, 13, 0, 1, tzinfo=UTC))
    assert await leader.run_once() == 2
    payloads = sorted(json.loads(r["payload"])["customer"] for r in await jobs(db, schema))
    assert payloads == ["acme", "globex"]
