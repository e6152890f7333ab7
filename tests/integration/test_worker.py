"""The worker in-process against a real database: handlers, retries, attempts, wake-ups,
concurrency and fenced writes."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import threading
import time
from typing import Any

import asyncpg
import pytest

from jobqueue import JobContext
from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.context import SyncJobContext
from jobqueue.db.records import ClaimedJob
from jobqueue.db.store import Store
from jobqueue.model.job import JobStatus
from jobqueue.worker.completer import Completer
from jobqueue.worker.worker import Worker
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio


async def test_async_handlers_run_on_the_loop_and_sync_ones_in_threads(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    ran: dict[str, str] = {}

    @jq.task("async_job")
    async def async_job(payload: dict[str, Any]) -> None:
        ran["async"] = threading.current_thread().name

    @jq.task("sync_job")
    def sync_job(payload: dict[str, Any]) -> None:
        ran["sync"] = threading.current_thread().name

    a = await jq.enqueue("async_job", {"n": 1})
    s = await jq.enqueue("sync_job")
    await start_worker()
    assert (await jq.wait(a.id, timeout=15)).status == JobStatus.COMPLETED
    assert (await jq.wait(s.id, timeout=15)).status == JobStatus.COMPLETED
    assert ran["async"] == threading.current_thread().name
    assert ran["sync"].startswith("jobqueue-handler")


async def test_handler_gets_payload_and_context(jq: JobQueue, start_worker: StartWorker) -> None:
    seen: list[tuple[dict[str, Any], JobContext]] = []

    @jq.task("ctx_job", max_attempts=4)
    async def ctx_job(payload: dict[str, Any], ctx: JobContext) -> None:
        seen.append((payload, ctx))

    job = await jq.enqueue("ctx_job", {"to": "a@b.c"}, queue="default")
    await start_worker()
    done = await jq.wait(job.id, timeout=15)
    assert done.status == JobStatus.COMPLETED
    assert done.attempts == 1
    assert done.started_at is not None
    assert done.finished_at is not None
    assert seen == [({"to": "a@b.c"}, JobContext(job.id, "ctx_job", "default", 1, 4))]


async def test_failed_attempts_retry_after_the_delay_until_max_attempts(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    attempts: list[tuple[int, float]] = []

    @jq.task("flaky")
    async def flaky(payload: dict[str, Any], ctx: JobContext) -> None:
        attempts.append((ctx.attempt, time.monotonic()))
        raise ValueError(f"boom on attempt {ctx.attempt}")

    job = await jq.enqueue("flaky", max_attempts=3)
    await start_worker(retry_delay=0.4)
    done = await jq.wait(job.id, timeout=15)
    assert done.status == JobStatus.FAILED
    assert done.attempts == 3
    assert done.last_error == "ValueError: boom on attempt 3"
    assert [a for a, _ in attempts] == [1, 2, 3]
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(attempts)]
    # Exponential backoff from RETRY_DELAY_SECONDS, ±10% jitter; never claimed early.
    assert gaps[0] >= 0.36, gaps
    assert gaps[1] >= 0.72, gaps


async def test_retry_waits_pending_with_run_at_in_the_future(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("fails_once")
    async def fails_once(payload: dict[str, Any], ctx: JobContext) -> None:
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")

    job = await jq.enqueue("fails_once")
    worker = await start_worker(retry_delay=60, poll_interval=0.05)
    await worker.completer.signals.flushed.wait_for(bool)  # the failure is written
    # Three claim passes since, two of them begun after the write at least: none took it.
    worker.producer.signals.polled.clear()
    assert await worker.producer.signals.polled.times(3) == [0, 0, 0]
    current = await jq.get(job.id)
    assert current is not None
    assert current.status == JobStatus.PENDING
    assert current.attempts == 1
    assert current.last_error == "RuntimeError: first attempt fails"
    assert (current.run_at - current.updated_at).total_seconds() > 50  # 60 s, ±10% jitter


async def test_job_max_attempts_overrides_task_and_default(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("always_fails", max_attempts=5)
    def always_fails(payload: dict[str, Any]) -> None:
        raise RuntimeError("nope")

    by_job = await jq.enqueue("always_fails", max_attempts=1)
    by_task = await jq.enqueue("always_fails")
    await start_worker(retry_delay=0)
    assert (await jq.wait(by_job.id, timeout=15)).attempts == 1
    done = await jq.wait(by_task.id, timeout=15)
    assert (done.status, done.attempts, done.max_attempts) == (JobStatus.FAILED, 5, 5)


async def test_scheduled_job_is_not_claimed_early(jq: JobQueue, start_worker: StartWorker) -> None:
    @jq.task("later")
    async def later(payload: dict[str, Any]) -> None:
        pass

    job = await jq.enqueue("later", delay_seconds=1.0)
    await start_worker()
    done = await jq.wait(job.id, timeout=15)
    assert done.started_at is not None
    assert done.started_at >= job.run_at


async def test_notify_wakes_an_idle_worker_long_before_the_poll(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("quick")
    async def quick(payload: dict[str, Any]) -> None:
        pass

    worker = await start_worker(poll_interval=60)
    await asyncio.wait_for(worker.listener.listening.wait(), 10)
    # A claim pass at start, and one more for the wake-up the listener sends once it
    # listens (for a job it may have missed): after the second, the producer sleeps on
    # its 60 s poll, and only a NOTIFY can wake it.
    await worker.producer.signals.asleep.times(2)
    job = await jq.enqueue("quick")
    done = await jq.wait(job.id, timeout=10)  # far below the poll interval
    assert done.status == JobStatus.COMPLETED


async def test_no_more_than_worker_count_jobs_run_at_once(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    running = peak = 0

    @jq.task("slow")
    async def slow(payload: dict[str, Any]) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.2)
        running -= 1

    jobs = [await jq.enqueue("slow") for _ in range(9)]
    await start_worker(worker_count=3)
    for job in jobs:
        assert (await jq.wait(job.id, timeout=15)).status == JobStatus.COMPLETED
    assert peak == 3


async def test_a_busy_worker_sends_its_next_claim_before_the_jobs_it_claimed_run(
    jq: JobQueue, start_worker: StartWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim that filled every slot it asked for, with slots still free, is followed
    at once by the next, on the same connection: the jobs just claimed run while the
    database answers it. Given back and taken again, the connection cost turns of the
    event loop in which those jobs ran first, and the next claim waited for them (a
    fifth of a drain of tiny jobs, docs/benchmarks.md)."""
    sent = 0
    claim = Store.claim

    async def counted(self: Store, **kw: Any) -> list[ClaimedJob]:
        nonlocal sent
        sent += 1
        return await claim(self, **kw)

    monkeypatch.setattr(Store, "claim", counted)
    seen: list[int] = []
    all_ran = asyncio.Event()

    @jq.task("tiny")
    async def tiny(payload: dict[str, Any]) -> None:
        seen.append(sent)  # how many claims had gone out when this job ran
        if len(seen) == 1200:
            all_ran.set()

    await jq.enqueue_many("tiny", [{}] * 1200)
    # Claims of 500, the most one takes. Which queues are limited is read again once a
    # poll interval, between passes: a first claim slower than the tests' 0.2 s (a
    # loaded machine) would read it before the next claim, and the jobs would run then.
    await start_worker(worker_count=1000, poll_interval=30)
    await asyncio.wait_for(all_ran.wait(), 30)
    assert seen[:500] == [2] * 500


async def test_with_one_pooled_connection_outcomes_are_written_between_claims(
    settings: Settings, db: asyncpg.Connection, schema: str
) -> None:
    """`jobqueue worker` has one pooled connection by default: claims that follow one
    another on it stop once they have filled the worker's slots, so that its outcomes
    are written while a backlog drains, not after it (leases would run out meanwhile)."""
    ran = 0
    drained = asyncio.Event()
    async with JobQueue(settings=dataclasses.replace(settings, pool_size=1)) as jq:

        @jq.task("tiny")
        async def tiny(payload: dict[str, Any]) -> None:
            nonlocal ran
            ran += 1
            if ran == 6000:
                drained.set()

        await jq.enqueue_many("tiny", [{}] * 6000)
        worker = Worker(
            await jq.pool(), jq.dsn, dataclasses.replace(jq.settings, worker_count=1000), jq.tasks
        )
        seen: list[tuple[int, int]] = []
        await worker.start()
        try:
            while not drained.is_set():
                row = await db.fetchrow(
                    f"SELECT count(*) FILTER (WHERE status = 'completed') AS done,"
                    f" count(*) FILTER (WHERE status = 'pending') AS left"
                    f' FROM "{schema}".jobs'
                )
                seen.append((row["done"], row["left"]))
                await asyncio.sleep(0.002)
        finally:
            await worker.stop(asyncio.Event())
    assert any(done > 0 and left > 0 for done, left in seen), seen


async def test_a_write_from_a_replaced_attempt_changes_nothing(
    jq: JobQueue, db: asyncpg.Connection, schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    job = await jq.enqueue("noop")
    store = await jq.store()
    first = (await store.claim(queue="default", limit=1, worker_id="old-worker", lease_seconds=30))[
        0
    ]
    # The job is taken from the first worker (as a rescue would) and claimed again.
    await db.execute(f"UPDATE \"{schema}\".jobs SET status = 'pending' WHERE id = $1", job.id)
    second = (
        await store.claim(queue="default", limit=1, worker_id="new-worker", lease_seconds=30)
    )[0]
    assert second.attempt == 2

    stale = Completer(store, "old-worker")
    with caplog.at_level(logging.WARNING, "jobqueue"):
        stale.complete(first)
        await stale.flush()
        stale.fail(first, "late failure", None, None)
        await stale.flush()
    row = await db.fetchrow(f'SELECT * FROM "{schema}".jobs WHERE id = $1', job.id)
    assert (row["status"], row["attempts"], row["worker_id"]) == ("running", 2, "new-worker")
    assert row["last_error"] is None
    rejected = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
    assert rejected == [
        f"Stale completion of job {job.id} attempt 1 rejected: "
        f"the job is no longer held by this attempt job_id={job.id} attempt=1",
        f"Stale failure of job {job.id} attempt 1 rejected: "
        f"the job is no longer held by this attempt job_id={job.id} attempt=1",
    ]

    current = Completer(store, "new-worker")
    current.complete(second)
    await current.flush()
    assert (await jq.get(job.id)).status == JobStatus.COMPLETED  # type: ignore[union-attr]


async def test_a_claim_the_database_forgot_cannot_write_over_the_claim_that_replaced_it(
    jq: JobQueue, db: asyncpg.Connection, schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A claim's commit does not wait for the disk (claim.sql), so a database crash can
    forget it: the job is as it was before, pending with no attempt counted, and the
    same worker may claim it again, as the same attempt. The run the forgotten claim
    started goes on; its writes name their claim's token and change nothing."""
    job = await jq.enqueue("noop")
    store = await jq.store()
    forgotten = (await store.claim(queue="default", limit=1, worker_id="w", lease_seconds=30))[0]
    before = (
        "status = 'pending', attempts = 0, worker_id = NULL, lease_expires_at = NULL, "
        "started_at = NULL, claim_token = NULL"
    )
    await db.execute(f'UPDATE "{schema}".jobs SET {before} WHERE id = $1', job.id)
    current = (await store.claim(queue="default", limit=1, worker_id="w", lease_seconds=30))[0]
    assert (current.attempt, forgotten.attempt) == (1, 1)
    assert current.claim != forgotten.claim

    renewal = await store.heartbeat(jobs=[forgotten], worker_id="w", lease_seconds=30)
    assert renewal.lost == [forgotten]
    old = Completer(store, "w")
    with caplog.at_level(logging.WARNING, "jobqueue"):
        old.complete(forgotten, '"the old run\'s"')
        await old.flush()
    assert [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()] == [
        f"Stale completion of job {job.id} attempt 1 rejected: "
        f"the job is no longer held by this attempt job_id={job.id} attempt=1"
    ]
    row = await db.fetchrow(f'SELECT * FROM "{schema}".jobs WHERE id = $1', job.id)
    assert (row["status"], row["attempts"], row["result"]) == ("running", 1, None)

    new = Completer(store, "w")
    new.complete(current, '"the new run\'s"')
    await new.flush()
    done = await jq.get(job.id)
    assert done is not None
    assert (done.status, done.result) == (JobStatus.COMPLETED, "the new run's")


async def test_a_claim_commits_without_waiting_for_the_disk(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    """Only the claim's own transaction: the enqueue before it and every outcome after
    it wait for their WAL to be flushed, as the session says."""
    await jq.enqueue("noop")
    store = await jq.store()
    async with db.transaction():
        assert await db.fetchval("SHOW synchronous_commit") == "on"
        assert await store.on(db).claim(queue="default", limit=1, worker_id="w", lease_seconds=30)
        assert await db.fetchval("SHOW synchronous_commit") == "off"
    assert await db.fetchval("SHOW synchronous_commit") == "on"


async def test_a_failing_handler_does_not_stop_the_others(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("bad")
    def bad(payload: dict[str, Any]) -> None:
        raise KeyError("missing")

    @jq.task("good")
    async def good(payload: dict[str, Any]) -> None:
        pass

    bads = [await jq.enqueue("bad", max_attempts=1) for _ in range(5)]
    goods = [await jq.enqueue("good") for _ in range(20)]
    await start_worker(worker_count=2)
    for job in goods:
        assert (await jq.wait(job.id, timeout=15)).status == JobStatus.COMPLETED
    for job in bads:
        assert (await jq.wait(job.id, timeout=15)).last_error == "KeyError: 'missing'"


async def test_sync_handlers_get_payload_and_context(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    seen: list[tuple[dict[str, Any], JobContext]] = []
    plain: list[dict[str, Any]] = []

    @jq.task("sync_ctx")
    def sync_ctx(payload: dict[str, Any], ctx: JobContext) -> None:
        seen.append((payload, ctx))

    @jq.task("sync_plain")
    def sync_plain(payload: dict[str, Any]) -> None:
        plain.append(payload)

    a = await jq.enqueue("sync_ctx", {"n": 1})
    b = await jq.enqueue("sync_plain", {"n": 2})
    await start_worker()
    assert (await jq.wait(a.id, timeout=15)).status == JobStatus.COMPLETED
    assert (await jq.wait(b.id, timeout=15)).status == JobStatus.COMPLETED
    assert seen == [({"n": 1}, SyncJobContext(a.id, "sync_ctx", "default", 1, 3))]
    assert plain == [{"n": 2}]


async def test_an_attempt_past_its_timeout_fails_and_is_retried(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    attempts: list[int] = []

    @jq.task("slow_then_fast", timeout=0.3)
    async def slow_then_fast(payload: dict[str, Any], ctx: JobContext) -> None:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            await asyncio.sleep(60)

    @jq.task("own_timeout_error")
    async def own_timeout_error(payload: dict[str, Any]) -> None:
        raise TimeoutError("upstream timed out")

    job = await jq.enqueue("slow_then_fast")
    other = await jq.enqueue("own_timeout_error", max_attempts=1)
    await start_worker(retry_delay=0)
    done = await jq.wait(job.id, timeout=15)
    assert (done.status, done.attempts) == (JobStatus.COMPLETED, 2)
    assert attempts == [1, 2]
    assert (await jq.wait(other.id, timeout=15)).last_error == "TimeoutError: upstream timed out"


async def test_default_timeout_applies_to_sync_handlers_too(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("sync_stuck")
    def sync_stuck(payload: dict[str, Any]) -> None:
        time.sleep(1.5)

    job = await jq.enqueue("sync_stuck", max_attempts=1)
    await start_worker(job_timeout=0.2)
    done = await jq.wait(job.id, timeout=15)
    assert (done.status, done.last_error) == (JobStatus.FAILED, "job exceeded its timeout of 0.2s")


async def test_isolated_sync_handlers_run_in_a_child_process(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    from tests.apps import poison_app

    jq.tasks["isolated_ok"] = poison_app.jq.tasks["isolated_ok"]
    ok = await jq.enqueue("isolated_ok", {})
    bad = await jq.enqueue("isolated_ok", {"fail": "missing"}, max_attempts=1)
    await start_worker()
    assert (await jq.wait(ok.id, timeout=15)).status == JobStatus.COMPLETED
    failed = await jq.wait(bad.id, timeout=15)
    assert (failed.status, failed.last_error) == (JobStatus.FAILED, "KeyError: 'missing'")
