"""Queues: counts by state kept by triggers, the longest wait, pause and resume across
workers; from Python and over HTTP (the CLI's in acceptance/test_cli.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import httpx
import pytest

from jobqueue import JobContext
from jobqueue.app import JobQueue
from jobqueue.db.sql import queries
from jobqueue.model.job import JobStatus
from tests.integration.conftest import StartWorker, add_ok_and_bad_tasks

pytestmark = pytest.mark.anyio


async def true_counts(db: asyncpg.Connection, schema: str) -> dict[tuple[str, str], int]:
    # A workflow's blocked jobs are in no queue's counts until released (docs/workflows.md).
    rows = await db.fetch(
        f"""SELECT queue, status, count(*) FROM "{schema}".jobs
            WHERE status <> 'blocked' GROUP BY 1, 2"""
    )
    return {(r[0], r[1]): r[2] for r in rows}


async def reported_counts(jq: JobQueue) -> dict[tuple[str, str], int]:
    counts = {}
    for q in await jq.queues():
        for status in set(JobStatus) - {JobStatus.BLOCKED}:
            n = getattr(q, status.value)
            if n:
                counts[(q.name, status.value)] = n
    return counts


async def test_counts_follow_every_kind_of_change(
    jq: JobQueue, start_worker: StartWorker, db: asyncpg.Connection, schema: str
) -> None:
    add_ok_and_bad_tasks(jq)
    await jq.enqueue_many("ok", [{}] * 40, queue="mail")
    await asyncio.gather(*(jq.enqueue("bad", queue="reports") for _ in range(7)))
    await jq.enqueue("ok", queue="later", delay_seconds=3600)
    worker = await start_worker(queues=("mail", "reports"))
    for job in await jq.list(limit=100):
        if job.queue != "later":
            await jq.wait(job.id, timeout=15)
    await worker.stop(asyncio.Event())  # so that nothing moves while the counts are compared
    assert await jq.retry_many(queue="reports") == 7
    await db.execute(f"""DELETE FROM "{schema}".jobs WHERE id IN
                         (SELECT id FROM "{schema}".jobs WHERE queue = 'mail' LIMIT 15)""")
    await db.execute(f"""UPDATE "{schema}".jobs SET status = 'cancelled', finished_at = now()
                         WHERE queue = 'later'""")
    expected = await true_counts(db, schema)
    assert expected[("mail", "completed")] == 25
    assert await reported_counts(jq) == expected


async def test_the_longest_wait_counts_only_due_jobs_across_priorities(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type, queue, priority, run_at) VALUES
            ('x', 'mail', 5, now() - interval '300 seconds'),
            ('x', 'mail', 0, now() - interval '10 seconds'),
            ('x', 'mail', -3, now() + interval '1 hour'),
            ('x', 'idle', 0, now() + interval '1 hour')"""
    )
    by_name = {q.name: q for q in await jq.queues()}
    assert by_name["mail"].oldest_pending_seconds == pytest.approx(300, abs=5)
    assert by_name["mail"].pending == 3
    assert by_name["idle"].oldest_pending_seconds is None


async def test_the_overview_counts_no_job_rows(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type, status, finished_at)
            SELECT 'x', 'completed', now() FROM generate_series(1, 20000)"""
    )
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type, priority)
            SELECT 'x', g % 3 FROM generate_series(1, 5000) AS g"""
    )
    await db.execute(f'ANALYZE "{schema}".jobs')
    plan = "\n".join(
        r[0]
        for r in await db.fetch(
            "EXPLAIN (ANALYZE, COSTS OFF) " + queries(schema).queues_overview, None, None
        )
    )
    assert "Seq Scan on jobs" not in plan, plan
    assert (await jq.queue("default")).completed == 20000


async def test_a_paused_queue_accepts_jobs_but_starts_none_until_resumed(
    jq: JobQueue, start_worker: StartWorker, api_client: httpx.AsyncClient
) -> None:
    @jq.task("ok")
    async def ok(payload: dict[str, Any]) -> None:
        pass

    paused = await api_client.post("/queues/mail/pause")
    assert paused.status_code == 200
    assert (paused.json()["name"], paused.json()["paused"]) == ("mail", True)
    worker = await start_worker(queues=("mail", "default"))
    held = await jq.enqueue("ok", queue="mail")
    free = await jq.enqueue("ok", queue="default")
    assert (await jq.wait(free.id, timeout=15)).status == JobStatus.COMPLETED
    # Three claim passes over both queues since, two begun after it at least: none took
    # the paused queue's job.
    worker.producer.signals.polled.clear()
    assert await worker.producer.signals.polled.times(3) == [0, 0, 0]
    assert (await jq.get(held.id)).status == JobStatus.PENDING  # type: ignore[union-attr]
    listed = {q["name"]: q for q in (await api_client.get("/queues")).json()["queues"]}
    assert listed["mail"]["paused"] is True
    assert listed["mail"]["pending"] == 1

    started = time.monotonic()
    resumed = await api_client.post("/queues/mail/resume")
    assert resumed.json()["paused"] is False
    assert (await jq.wait(held.id, timeout=15)).status == JobStatus.COMPLETED
    assert time.monotonic() - started < 0.5  # woken by NOTIFY, not a poll later

    bad = await api_client.post("/queues/no%20spaces/pause")
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["field"] == "name"


async def test_a_queue_limit_caps_its_jobs_while_other_queues_use_the_free_slots(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    running = {"slow": 0, "fast": 0}
    peak = {"slow": 0, "fast": 0}

    async def work(payload: dict[str, Any], ctx: JobContext) -> None:
        running[ctx.type] += 1
        peak[ctx.type] = max(peak[ctx.type], running[ctx.type])
        await asyncio.sleep(0.3)
        running[ctx.type] -= 1

    jq.task("slow", queue="slow")(work)
    jq.task("fast")(work)

    slow_ids = await jq.enqueue_many("slow", [{}] * 6, queue="slow")
    fast_ids = await jq.enqueue_many("fast", [{}] * 6)
    await start_worker(worker_count=10, queues=("slow=2", "default"))
    for job_id in [*slow_ids, *fast_ids]:
        assert (await jq.wait(job_id, timeout=15)).status == JobStatus.COMPLETED
    assert peak["slow"] == 2
    assert peak["fast"] >= 5  # the slots the slow queue may not take
