"""The dashboard's per-minute series (migrations 0017, 0018): the leader's fold of the
counter changes counts the jobs that completed and failed in each minute, its rounds
set each minute's waits from a bounded sample of its jobs, and old minutes go."""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.maintenance.series import GRACE_SECONDS, Series

pytestmark = pytest.mark.anyio


async def finish_in_one_transaction(
    jq: JobQueue, db: asyncpg.Connection, schema: str, jobs: list[tuple[str, str, float]]
) -> datetime:
    """Jobs ``(queue, status, waited seconds)``, each ended in one transaction, so that
    their counter changes share its minute; returns that minute. Each fell due at the
    minute's start, waited as said, and finished a second after it started."""
    ids = [(await jq.enqueue("report", queue=queue)).id for queue, _, _ in jobs]
    async with db.transaction():
        minute: datetime = await db.fetchval("SELECT date_trunc('minute', now())")
        for job_id, (_, status, waited) in zip(ids, jobs, strict=True):
            started = minute + timedelta(seconds=waited)
            await db.execute(
                f"""UPDATE "{schema}".jobs SET status = $2, run_at = $3, started_at = $4,
                           finished_at = $5, attempts = 1 WHERE id = $1""",
                job_id, status, minute, started, started + timedelta(seconds=1),
            )  # fmt: skip
    return minute


async def test_counts_come_from_the_fold_and_waits_from_a_sample(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    store = await jq.store()
    waits = [("mail", "completed", float(i + 1)) for i in range(10)]  # 1..10 s
    minute = await finish_in_one_transaction(
        jq, db, schema,
        [*waits, ("mail", "failed", 0.0), ("other", "completed", 2.0), ("other", "cancelled", 2.0)],
    )  # fmt: skip
    assert await store.queue_minutes_read(since=minute, queues=None, bucket_seconds=60) == []

    await store.queue_counts_fold(limit=10_000)
    rows = await store.queue_minutes_read(since=minute, queues=None, bucket_seconds=60)
    assert [(r.at, r.completed, r.failed, r.wait_p50) for r in rows] == [(minute, 11, 1, None)]

    series = Series(store)
    jq.clock.set(minute + timedelta(minutes=1, seconds=GRACE_SECONDS - 1))
    assert await series.run_once() == 0  # the minute is not over for long enough
    jq.clock.set(minute + timedelta(minutes=1, seconds=GRACE_SECONDS + 1))
    assert await series.run_once() == 2  # its two queues' rows
    assert await series.run_once() == 0  # once

    rows = await store.queue_minutes_read(since=minute, queues=["mail"], bucket_seconds=60)
    # Waits of 0 (the failed job) and 1..10 s: the median is 5 s, p95 about 9.5 s.
    assert rows[0].wait_p50 == pytest.approx(5.0)
    assert rows[0].wait_p95 == pytest.approx(9.5)
    other = await store.queue_minutes_read(since=minute, queues=["other"], bucket_seconds=60)
    assert [(r.completed, r.failed, r.wait_p50) for r in other] == [(1, 0, pytest.approx(2.0))]

    # Retention and retries take jobs out of the totals, and out of no minute.
    await db.execute(f"""DELETE FROM "{schema}".jobs WHERE queue = 'other'""")
    await db.execute(f"""UPDATE "{schema}".jobs SET status = 'pending' WHERE status = 'failed'""")
    await store.queue_counts_fold(limit=10_000)
    day = await store.queue_minutes_read(since=minute, queues=None, bucket_seconds=900)
    assert (sum(r.completed for r in day), sum(r.failed for r in day)) == (11, 1)

    jq.clock.advance(3 * 86400)
    await series.run_once()
    assert await store.queue_minutes_read(since=minute, queues=None, bucket_seconds=60) == []


async def test_a_minute_is_sampled_not_read_whole(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    """The waits read at most the sample's jobs, however many finished that minute."""
    store = await jq.store()
    minute = await finish_in_one_transaction(
        jq, db, schema, [("mail", "completed", 1.0)] * 30 + [("mail", "completed", 9.0)] * 30
    )
    await store.queue_counts_fold(limit=10_000)
    jq.clock.set(minute + timedelta(minutes=2))
    assert await store.queue_minutes_waits(grace_seconds=GRACE_SECONDS, sample=20) == 1
    rows = await store.queue_minutes_read(since=minute, queues=None, bucket_seconds=60)
    # The sample is the first 20 to finish, all of the 1 s ones: the 9 s ones unread.
    assert [(r.completed, r.wait_p50, r.wait_p95) for r in rows] == [
        (60, pytest.approx(1.0), pytest.approx(1.0))
    ]


async def test_the_leader_counts_and_samples_in_its_rounds(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    from jobqueue.maintenance.leader import Leader

    minute = await finish_in_one_transaction(jq, db, schema, [("default", "completed", 0.5)])
    leader = Leader(await jq.store(), "w1", lease_seconds=30, interval=1)
    jq.clock.set(minute + timedelta(minutes=2))
    await leader.run_once()
    assert leader.is_leader
    row = await db.fetchrow(
        f'SELECT completed, waited, wait_p50 FROM "{schema}".queue_minutes WHERE minute = $1',
        minute,
    )
    assert tuple(row.values()) == (1, True, pytest.approx(0.5))
