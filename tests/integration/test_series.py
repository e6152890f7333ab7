"""The dashboard's per-minute series (migration 0017): the maintenance leader writes
each minute once it is over, from the jobs that finished in it, and forgets old ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.maintenance.series import GRACE_SECONDS, Series

pytestmark = pytest.mark.anyio


async def finish(
    jq: JobQueue, db: asyncpg.Connection, schema: str, *, queue: str, status: str,
    due: datetime, waited: float, finished: datetime,
) -> None:  # fmt: skip
    """A job of ``queue`` that fell due at ``due``, started ``waited`` s later and
    ended ``status`` at ``finished``."""
    job = await jq.enqueue("report", queue=queue)
    await db.execute(
        f"""UPDATE "{schema}".jobs SET status = $2, run_at = $3, started_at = $4,
                   finished_at = $5, attempts = 1 WHERE id = $1""",
        job.id, status, due, due + timedelta(seconds=waited), finished,
    )  # fmt: skip


async def test_each_minute_is_written_once_with_its_counts_and_wait_percentiles(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    store = await jq.store()
    minute = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
    for i in range(10):  # waits of 1..10 s, finished in the first minute
        await finish(
            jq, db, schema, queue="mail", status="completed",
            due=minute, waited=i + 1, finished=minute + timedelta(seconds=5 + i),
        )  # fmt: skip
    await finish(
        jq, db, schema, queue="mail", status="failed",
        due=minute, waited=0, finished=minute + timedelta(seconds=30),
    )  # fmt: skip
    await finish(
        jq, db, schema, queue="other", status="completed",
        due=minute, waited=2, finished=minute + timedelta(minutes=1, seconds=1),
    )  # fmt: skip
    await finish(
        jq, db, schema, queue="other", status="cancelled",
        due=minute, waited=2, finished=minute + timedelta(minutes=1, seconds=2),
    )  # fmt: skip
    series = Series(store)

    # Within the grace after the second minute ends, only the first is written.
    jq.clock.set(minute + timedelta(minutes=2, seconds=GRACE_SECONDS - 1))
    assert await series.run_once() == 1
    jq.clock.set(minute + timedelta(minutes=2, seconds=GRACE_SECONDS + 1))
    assert await series.run_once() == 1  # the second minute, once
    assert await series.run_once() == 0

    rows = await store.queue_minutes_read(since=minute, queues=None, bucket_seconds=60)
    assert [(r.at, r.completed, r.failed) for r in rows] == [
        (minute, 10, 1),
        (minute + timedelta(minutes=1), 1, 0),  # the cancelled job is in neither
    ]
    # Waits of 0 (the failed job) and 1..10 s: the median is 5 s, p95 about 9.5 s.
    assert rows[0].wait_p50 == pytest.approx(5.0)
    assert rows[0].wait_p95 == pytest.approx(9.5)
    only_other = await store.queue_minutes_read(since=minute, queues=["other"], bucket_seconds=60)
    assert [(r.completed, r.wait_p50) for r in only_other] == [(1, pytest.approx(2.0))]
    day = await store.queue_minutes_read(since=minute, queues=None, bucket_seconds=900)
    assert sum(r.completed for r in day) == 11

    jq.clock.advance(3 * 86400)
    await series.run_once()
    assert await store.queue_minutes_read(since=minute, queues=None, bucket_seconds=60) == []


async def test_the_leader_writes_the_series_in_its_rounds(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    from jobqueue.maintenance.leader import Leader

    minute = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=3)
    await finish(
        jq, db, schema, queue="default", status="completed",
        due=minute, waited=0.5, finished=minute + timedelta(seconds=1),
    )  # fmt: skip
    leader = Leader(await jq.store(), "w1", lease_seconds=30, interval=1)
    await leader.run_once()
    assert leader.is_leader
    count = await db.fetchval(f'SELECT sum(completed) FROM "{schema}".queue_minutes')
    assert count == 1
