"""The Python API: enqueue from async and sync code, and inside the application's own
transaction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.model.job import JobStatus
from tests.integration.conftest import Notifications

pytestmark = pytest.mark.anyio


async def test_enqueue_uses_task_defaults_then_job_overrides(jq: JobQueue) -> None:
    @jq.task("report", queue="reports", max_attempts=7, priority=5)
    async def report(payload: dict[str, object]) -> None:
        pass

    by_task = await jq.enqueue("report", {"id": 1})
    assert (by_task.queue, by_task.max_attempts, by_task.priority) == ("reports", 7, 5)
    by_job = await jq.enqueue("report", queue="urgent", max_attempts=1, priority=-1)
    assert (by_job.queue, by_job.max_attempts, by_job.priority) == ("urgent", 1, -1)
    untyped = await jq.enqueue("other")
    assert (untyped.queue, untyped.max_attempts, untyped.priority) == ("default", 3, 0)
    assert await jq.get(by_task.id) == by_task


async def test_run_at_and_delay(jq: JobQueue) -> None:
    at = datetime(2031, 5, 1, 12, 0, tzinfo=UTC)
    assert (await jq.enqueue("x", run_at=at)).run_at == at
    delayed = await jq.enqueue("x", delay_seconds=90)
    assert timedelta(seconds=89) < delayed.run_at - delayed.created_at < timedelta(seconds=91)
    # Fractions count: the delay is a float8 in every enqueue statement, not an integer.
    brief = await jq.enqueue("x", delay_seconds=0.8)
    assert brief.run_at - brief.created_at == timedelta(seconds=0.8)
    [many] = await jq.enqueue_many("x", [{}], delay_seconds=0.8)
    unique = await jq.enqueue("x", delay_seconds=0.8, unique_key="u")
    for job_id in (many, unique.id):
        job = await jq.get(job_id)
        assert job is not None
        assert job.run_at - job.created_at == timedelta(seconds=0.8)
    with pytest.raises(ValueError, match="not both"):
        await jq.enqueue("x", run_at=at, delay_seconds=1)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": 1001}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"priority": 2**31}, "priority"),
        ({"priority": "1"}, "priority"),
        ({"queue": "has space"}, "queue"),
        ({"queue": ""}, "queue"),
        ({"run_at": datetime(2031, 5, 1)}, "run_at"),  # no time zone
        ({"delay_seconds": -1}, "delay_seconds"),
        ({"payload": [1, 2]}, "payload"),
    ],
)
async def test_invalid_enqueue_raises_naming_the_field_and_stores_nothing(
    jq: JobQueue, kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=rf"^{field}: "):
        await jq.enqueue("x", **kwargs)
    with pytest.raises(ValueError, match=r"^type: "):
        await jq.enqueue("  ")
    assert await jq.list() == []


async def test_enqueue_in_the_applications_transaction(
    jq: JobQueue, pg_dsn: str, notified: Notifications
) -> None:
    app_conn = await asyncpg.connect(pg_dsn)
    try:
        async with app_conn.transaction():
            kept = await jq.enqueue("kept", conn=app_conn)
            assert await jq.get(kept.id) is None  # invisible until commit
            assert await notified.so_far() == []  # and no worker is woken before it
        assert await jq.get(kept.id) is not None
        assert await notified.so_far() == ["default"]

        transaction = app_conn.transaction()
        await transaction.start()
        dropped = await jq.enqueue("dropped", conn=app_conn)
        await transaction.rollback()
        assert await jq.get(dropped.id) is None
        assert await notified.so_far() == []
    finally:
        await app_conn.close()


async def test_one_notify_per_transaction_and_queue_not_per_job(
    jq: JobQueue, pg_dsn: str, notified: Notifications
) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        async with conn.transaction():
            for _ in range(50):
                await jq.enqueue("many", conn=conn)
            await jq.enqueue("other_queue", queue="q2", conn=conn)
            await jq.enqueue("later", queue="q3", delay_seconds=60, conn=conn)
        assert sorted(await notified.so_far()) == ["default", "q2"]  # none for one not due
    finally:
        await conn.close()


def test_sync_enqueue_and_get(settings: Settings) -> None:
    jq = JobQueue(settings=settings)
    try:
        job = jq.enqueue_sync("sync_made", {"n": 1}, priority=2)
        assert (job.type, job.payload, job.priority, job.status) == (
            "sync_made",
            {"n": 1},
            2,
            JobStatus.PENDING,
        )
        assert jq.get_sync(job.id) == job
        assert jq.enqueue_sync("second").id == job.id + 1
    finally:
        jq.close_sync()


async def test_enqueue_many_stores_all_in_order_and_notifies_once(
    jq: JobQueue, notified: Notifications
) -> None:
    ids = await jq.enqueue_many("bulk", ({"n": n} for n in range(2500)), queue="bulk", priority=1)
    assert len(ids) == 2500
    assert ids == sorted(ids)
    last = await jq.get(ids[-1])
    assert last is not None
    assert (last.payload, last.queue, last.priority, last.max_attempts) == (
        {"n": 2499},
        "bulk",
        1,
        3,
    )
    assert await notified.so_far() == ["bulk"]
    assert await jq.enqueue_many("bulk", []) == []


async def test_enqueue_many_is_all_or_nothing(jq: JobQueue) -> None:
    with pytest.raises(TypeError):
        await jq.enqueue_many("bulk", [{"ok": 1}, {"bad": object()}])
    with pytest.raises(ValueError, match=r"^max_attempts: "):
        await jq.enqueue_many("bulk", [{"ok": 1}], max_attempts=0)
    with pytest.raises(ValueError, match=r"^payloads\[1\]: "):
        await jq.enqueue_many("bulk", [{"ok": 1}, "not a mapping"])  # type: ignore[list-item]
    # NaN is no JSON: refused before the INSERT, which jsonb would fail, naming where.
    with pytest.raises(ValueError, match=r"^payloads\[1\]: payload.x.0: nan is not a JSON number"):
        await jq.enqueue_many("bulk", [{"ok": 1}, {"x": [float("nan")]}])
    with pytest.raises(ValueError, match=r"^payload.x: inf is not a JSON number$"):
        await jq.enqueue("bulk", {"x": float("inf")})
    with pytest.raises(ValueError, match=r"^delay_seconds: must be a finite number"):
        await jq.enqueue("bulk", {}, delay_seconds=float("nan"))
    with pytest.raises(ValueError, match=r"^delay_seconds: must be a finite number"):
        await jq.enqueue_many("bulk", [{}], delay_seconds=float("inf"))
    assert await jq.list() == []
