"""Retention: finished jobs are deleted after their time, in batches, by the leader."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.db.sql import queries
from jobqueue.maintenance.retention import Retention
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio

DAY = 86400.0


async def finished(db: asyncpg.Connection, schema: str, status: str, hours_ago: float) -> int:
    job_id: int = await db.fetchval(
        f"""INSERT INTO "{schema}".jobs (type, status, attempts, finished_at)
            VALUES ('x', $1, 1, now() - make_interval(secs => $2)) RETURNING id""",
        status,
        hours_ago * 3600,
    )
    return job_id


async def test_each_state_is_kept_for_its_own_time(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    old_done = await finished(db, schema, "completed", 25)
    new_done = await finished(db, schema, "completed", 23)
    old_cancelled = await finished(db, schema, "cancelled", 25)
    dead = await finished(db, schema, "failed", 8 * 24)
    recent_dead = await finished(db, schema, "failed", 6 * 24)
    await db.execute(
        f"""INSERT INTO "{schema}".job_attempts (job_id, attempt, error)
            VALUES ($1, 1, 'boom'), ($2, 1, 'boom')""",
        dead,
        recent_dead,
    )
    waiting = (await jq.enqueue("x", run_at=None)).id

    deleted = await Retention(
        await jq.store(), retain_completed=DAY, retain_failed=7 * DAY
    ).run_once()
    assert deleted == 3
    left = {r[0] for r in await db.fetch(f'SELECT id FROM "{schema}".jobs')}
    assert left == {new_done, recent_dead, waiting}
    assert old_done not in left
    assert old_cancelled not in left
    history = await db.fetch(f'SELECT job_id FROM "{schema}".job_attempts')
    assert [r[0] for r in history] == [recent_dead]  # the dead letter's history went with it
    assert (await jq.queue("default")).completed == 1


async def test_forever_keeps_everything_and_batches_take_all(
    jq: JobQueue, db: asyncpg.Connection, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("jobqueue.maintenance.retention.BATCH", 7)
    monkeypatch.setattr("jobqueue.maintenance.retention.PAUSE_SECONDS", 0)
    for _ in range(30):
        await finished(db, schema, "completed", 48)
    await finished(db, schema, "failed", 1000)
    keep_failed = Retention(await jq.store(), retain_completed=DAY, retain_failed=None)
    assert await keep_failed.run_once() == 30
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".jobs') == 1


async def test_the_delete_reads_the_finished_index_not_the_table(
    db: asyncpg.Connection, schema: str
) -> None:
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type, status, finished_at)
            SELECT 'x', 'completed', now() FROM generate_series(1, 20000)"""
    )
    await db.execute(f'ANALYZE "{schema}".jobs')
    sql = queries(schema).retention_delete
    plan = "\n".join(
        r[0] for r in await db.fetch("EXPLAIN " + sql, ["completed", "cancelled"], DAY, 1000, None)
    )
    assert "jobs_finished_idx" in plan, plan
    assert "Seq Scan on jobs" not in plan, plan


async def test_the_leader_deletes_old_jobs_while_workers_run(
    jq: JobQueue, db: asyncpg.Connection, schema: str, start_worker: StartWorker
) -> None:
    old = await finished(db, schema, "completed", 1)
    await start_worker(retain_completed=60.0, rescue_interval=0.1)
    deadline = time.monotonic() + 10
    while await jq.get(old) is not None:
        assert time.monotonic() < deadline, "the leader did not delete the old job"
        await asyncio.sleep(0.05)
