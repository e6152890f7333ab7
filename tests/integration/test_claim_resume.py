"""Claims resume where the last one ended, so that a held xmin does not make each one
walk every job claimed since, and still take every job in priority order: whatever
is queued ahead of that point is found by the next claim."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.db.records import ClaimKey
from jobqueue.db.sql import queries
from jobqueue.enqueue.new_job import NewJob
from jobqueue.worker import Worker
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio


def _ordered(jq: JobQueue) -> tuple[list[str], asyncio.Event]:
    """A worker of one slot running "step" jobs, the first of which waits for the
    event returned: until it is set, the worker's claims resume after that job."""
    order: list[str] = []
    gate = asyncio.Event()

    @jq.task("step")
    async def step(payload: dict[str, Any]) -> None:
        order.append(payload["name"])
        if payload["name"] == "first":
            await gate.wait()

    return order, gate


async def _run_first(
    jq: JobQueue, start_worker: StartWorker, priority: int, ahead: list[NewJob] | None = None
) -> tuple[list[str], asyncio.Event, Worker]:
    """Start the worker, then give it "first" and four more of ``priority`` (and
    ``ahead``) in one statement: its claim of "first" is made with the listener in
    place, so its next claim resumes after "first" unless a NOTIFY says otherwise."""
    order, gate = _ordered(jq)
    worker = await start_worker(worker_count=1)
    await worker.listener.listening.wait()
    names = ["first", *(f"queued-{n}" for n in range(4))]
    await jq.enqueue_jobs(
        [
            *(ahead or []),
            *(NewJob(type="step", payload={"name": n}, priority=priority) for n in names),
        ]
    )
    await worker.executor.signals.started.wait()
    assert order == ["first"]
    return order, gate, worker


async def _finish(gate: asyncio.Event, worker: Worker, total: int) -> None:
    gate.set()
    await worker.executor.signals.finished.times(total)


async def test_a_better_priority_queued_meanwhile_runs_next(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    order, gate, worker = await _run_first(jq, start_worker, priority=5)
    await jq.enqueue("step", {"name": "urgent"}, priority=0)
    await _finish(gate, worker, 6)
    assert order[:2] == ["first", "urgent"]


async def test_a_job_due_earlier_than_the_last_claimed_runs_next(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    """Same priority, but due an hour ago: in the claim order it comes before the job
    the claims resume after. Its NOTIFY says so, and the next claim looks from the start."""
    order, gate, worker = await _run_first(jq, start_worker, priority=0)
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    await jq.enqueue("step", {"name": "overdue"}, run_at=hour_ago)
    # Its NOTIFY reaches the worker on a connection of its own: let it arrive before the
    # first job ends, or the next claim may run before it.
    due = (hour_ago - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    await worker.producer.signals.notified.wait_for(lambda n: n == ("default", due))
    await _finish(gate, worker, 6)
    assert order[:2] == ["first", "overdue"]


async def test_a_job_aged_ahead_of_the_last_claimed_runs_next(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    """Aging moves a job to a better priority with its old run_at: it lands before the
    job the claims resume after, and aging's NOTIFY says "look from the start"."""
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    aged = NewJob(type="step", payload={"name": "aged"}, priority=1, run_at=hour_ago)
    order, gate, worker = await _run_first(jq, start_worker, priority=0, ahead=[aged])
    store = await jq.store()
    assert await store.priority_age(step_seconds=0, limit=10) == 1
    await worker.producer.signals.notified.wait_for(lambda n: n == ("default", None))
    await _finish(gate, worker, 6)
    assert order[:2] == ["first", "aged"]


async def test_a_claim_resumed_under_a_held_snapshot_skips_the_jobs_claimed_before(
    jq: JobQueue, db: asyncpg.Connection, pg_dsn: str, schema: str
) -> None:
    """What the resume is for: while a transaction holds the xmin back, the claim
    index keeps an entry for every job claimed since, and nothing can remove it.
    Read from the start, a claim visits each one and its row; resumed, it does not."""
    holder = await asyncpg.connect(pg_dsn)
    try:
        await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        await holder.fetchval("SELECT 1")  # the snapshot is taken: the xmin is held
        await jq.enqueue_many("noop", [{}] * 10_000)
        store = await jq.store()
        last: ClaimKey | None = None
        while jobs := await store.claim(
            queue="default", limit=500, worker_id="w", lease_seconds=60, resume_at=last
        ):
            last = max(job.key for job in jobs)
        await jq.enqueue("noop")
        assert last is not None
        from_start = await _buffers_read_by_claim(db, schema, None)
        resumed = await _buffers_read_by_claim(db, schema, last)
        # From the start: a visit to every page of claimed jobs (about 150 here).
        assert from_start > 4 * resumed, (from_start, resumed)
        assert resumed < 50, resumed
    finally:
        await holder.close()


async def _buffers_read_by_claim(db: asyncpg.Connection, schema: str, at: ClaimKey | None) -> int:
    """The buffers one claim of a job reads, run and rolled back."""
    transaction = db.transaction()
    await transaction.start()
    try:
        plan = await db.fetchval(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + queries(schema).claim,
            "default", 1, "w", 60.0, None, *(at or (None, None, None)), None,
        )  # fmt: skip
    finally:
        await transaction.rollback()
    top = json.loads(plan)[0]["Plan"]
    return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])
