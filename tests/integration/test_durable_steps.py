"""Durable steps and checkpoints (docs/durable.md): a step runs once per job, whatever
happens to the attempts around it; what a stale attempt records is not kept; a
checkpoint is handed to the next attempt; steps show with their job and go with it."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from jobqueue import JobContext
from jobqueue.app import JobQueue
from jobqueue.context import SyncJobContext
from jobqueue.durable import AttemptLost, Durable
from jobqueue.model.job import JobStatus
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio


async def test_a_step_runs_once_per_job_across_its_attempts(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    calls: list[tuple[str, int]] = []

    async def charge(order: str, *, cents: int) -> dict[str, Any]:
        calls.append(("charge", cents))
        return {"charge": f"ch-{order}", "at": datetime(2026, 12, 6, 10, 0)}

    def email(to: str) -> str:  # a plain function, called in the async handler
        calls.append(("email", 0))
        return f"sent to {to}"

    seen: list[Any] = []

    @jq.task("order", max_attempts=3)
    async def order(payload: dict[str, Any], ctx: JobContext) -> list[Any]:
        charged = await ctx.step("charge", charge, payload["order"], cents=1250)
        sent = await ctx.step("email", email, "a@example.com")
        seen.append((ctx.attempt, charged, sent))
        if ctx.attempt < 3:
            raise RuntimeError("the step after the email failed")
        return [charged, sent]

    job = await jq.enqueue("order", {"order": "o-7"})
    await start_worker(retry_delay=0)
    done = await jq.wait(job.id, timeout=15)
    assert (done.status, done.attempts) == (JobStatus.COMPLETED, 3)
    assert calls == [("charge", 1250), ("email", 0)]  # once each, in three attempts
    # The value after a step is the recorded JSON on every attempt, the first too.
    charged = {"charge": "ch-o-7", "at": "2026-12-06T10:00:00"}
    assert seen == [(n, charged, "sent to a@example.com") for n in (1, 2, 3)]
    steps = (await jq.detail(job)).steps
    assert [(s.name, s.attempt, s.result) for s in steps] == [
        ("charge", 1, charged),
        ("email", 1, "sent to a@example.com"),
    ]


async def test_a_step_that_raises_is_not_recorded_and_runs_again(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    tries: list[int] = []

    async def flaky(ctx: JobContext) -> int:
        tries.append(ctx.attempt)
        if ctx.attempt == 1:
            raise ConnectionError("partner down")
        return 42

    @jq.task("call_partner", max_attempts=2)
    async def call_partner(payload: dict[str, Any], ctx: JobContext) -> int:
        value: int = await ctx.step("partner", flaky, ctx)
        return value

    job = await jq.enqueue("call_partner")
    await start_worker(retry_delay=0)
    done = await jq.wait(job.id, timeout=15)
    assert (done.status, done.result, tries) == (JobStatus.COMPLETED, 42, [1, 2])
    assert [(s.name, s.attempt) for s in (await jq.detail(job)).steps] == [("partner", 2)]


async def test_a_sync_handler_steps_through_its_sync_context(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    calls: list[int] = []

    def reserve(n: int) -> int:
        calls.append(n)
        return n * 2

    @jq.task("sync_order", max_attempts=2)
    def sync_order(payload: dict[str, Any], ctx: SyncJobContext) -> int:
        assert isinstance(ctx, SyncJobContext)
        total = sum(ctx.step(f"reserve-{n}", reserve, n) for n in range(3))
        ctx.checkpoint({"reserved": total})
        if ctx.attempt == 1:
            raise RuntimeError("after the reservations")
        assert ctx.last_checkpoint == {"reserved": 6}
        return total

    job = await jq.enqueue("sync_order")
    await start_worker(retry_delay=0)
    done = await jq.wait(job.id, timeout=15)
    assert (done.status, done.result, done.attempts) == (JobStatus.COMPLETED, 6, 2)
    assert calls == [0, 1, 2]
    assert done.checkpoint == {"reserved": 6}


async def test_a_step_name_used_twice_in_one_run_fails_the_attempt(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("twice", max_attempts=1)
    async def twice(payload: dict[str, Any], ctx: JobContext) -> None:
        await ctx.step("send", lambda: 1)
        await ctx.step("send", lambda: 2)

    @jq.task("sleepy_name", max_attempts=1)
    async def sleepy_name(payload: dict[str, Any], ctx: JobContext) -> None:
        await ctx.step("sleep-1", lambda: 1)  # the name of the run's first sleep

    job = await jq.enqueue("twice")
    taken = await jq.enqueue("sleepy_name")
    await start_worker()
    done = await jq.wait(job.id, timeout=15)
    assert done.status == JobStatus.FAILED
    assert "step 'send' ran already in this run" in str(done.last_error)
    refused = await jq.wait(taken.id, timeout=15)
    assert refused.status == JobStatus.FAILED
    assert "step names starting 'sleep-', 'signal-', 'spawn-' are the run's own" in str(
        refused.last_error
    )


async def test_iterate_resumes_after_the_last_position_it_saved(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    handled: list[tuple[int, int]] = []

    @jq.task("rows", max_attempts=2)
    async def rows(payload: dict[str, Any], ctx: JobContext) -> int:
        async for row in ctx.iterate(range(500), every=100):
            if row == 250 and ctx.attempt == 1:
                raise RuntimeError("row 250 is bad, this time")
            handled.append((ctx.attempt, row))
        return len(handled)

    job = await jq.enqueue("rows")
    await start_worker(retry_delay=0)
    done = await jq.wait(job.id, timeout=15)
    assert done.status == JobStatus.COMPLETED
    assert [row for attempt, row in handled if attempt == 1] == list(range(250))
    assert [row for attempt, row in handled if attempt == 2] == list(range(200, 500))
    assert done.checkpoint == 500


async def test_a_stale_attempt_cannot_record_a_step_or_a_checkpoint(jq: JobQueue) -> None:
    store = await jq.store()
    job = await jq.enqueue("anything")
    [first] = await store.claim(queue="default", limit=1, worker_id="a", lease_seconds=30)
    run = Durable(store, "a", 65536).run(first)
    assert await run.recall("one") is not None  # not recorded yet: the sentinel
    assert await run.record("one", 1) == 1
    # Its lease lapses; the job is rescued and claimed by another worker.
    jq.clock.set(datetime.now().astimezone())
    jq.clock.advance(60)
    assert len(await store.rescue(limit=10)) == 1
    [second] = await store.claim(queue="default", limit=1, worker_id="b", lease_seconds=30)
    assert second.attempt == 2
    with pytest.raises(AttemptLost, match="step 'two' was not recorded"):
        await run.record("two", 2)
    with pytest.raises(AttemptLost, match="checkpoint was not saved"):
        await run.checkpoint({"at": 9})
    # The same worker id with the old claim is refused too: the claim is the fence.
    stale = Durable(store, "b", 65536).run(dataclasses.replace(second, claim=first.claim))
    with pytest.raises(AttemptLost):
        await stale.record("two", 2)
    assert [s.name for s in (await jq.detail(job)).steps] == ["one"]
    shown = await jq.get(job.id)
    assert shown is not None
    assert shown.checkpoint is None


async def test_steps_show_in_get_job_and_go_with_their_job(
    jq: JobQueue, start_worker: StartWorker, api_client: httpx.AsyncClient
) -> None:
    @jq.task("shown")
    async def shown(payload: dict[str, Any], ctx: JobContext) -> None:
        await ctx.step("fetch", lambda: {"rows": 3})
        await ctx.checkpoint({"page": 2})

    job = await jq.enqueue("shown")
    await start_worker()
    await jq.wait(job.id, timeout=15)
    body = (await api_client.get(f"/jobs/{job.id}")).json()
    assert body["checkpoint"] == {"page": 2}
    assert [(s["name"], s["attempt"], s["result"]) for s in body["steps"]] == [
        ("fetch", 1, {"rows": 3})
    ]
    assert body["steps"][0]["worker_id"] == body["worker_id"]
    assert "steps" not in (await api_client.get("/jobs")).json()["jobs"][0]
    # Retention deletes the job, and its steps with it.
    store = await jq.store()
    assert await store.retention_delete(statuses=["completed"], older_than_seconds=0, limit=9) == 1
    assert (await jq.detail(job)).steps == []


async def test_a_manual_retry_keeps_the_steps_and_the_checkpoint(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    charged: list[int] = []

    async def charge() -> str:
        charged.append(1)
        return "ch-1"

    @jq.task("fragile", max_attempts=1)
    async def fragile(payload: dict[str, Any], ctx: JobContext) -> str:
        charge_id: str = await ctx.step("charge", charge)
        if ctx.last_checkpoint is None:
            await ctx.checkpoint("charged")
            raise RuntimeError("the partner was down")
        return charge_id

    job = await jq.enqueue("fragile")
    await start_worker(retry_delay=0)
    assert (await jq.wait(job.id, timeout=15)).status == JobStatus.FAILED
    await jq.retry(job.id)
    done = await jq.wait(job.id, timeout=15)
    assert (done.status, done.result, done.checkpoint) == (JobStatus.COMPLETED, "ch-1", "charged")
    assert charged == [1]  # the card was charged once, in two runs


async def test_a_durable_sleep_frees_the_slot_and_resumes_after_its_time(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    before: list[int] = []
    slept: list[datetime] = []

    async def remember() -> str:
        before.append(1)
        return "done before the sleep"

    @jq.task("nap")
    async def nap(payload: dict[str, Any], ctx: JobContext) -> str:
        first: str = await ctx.step("before", remember)
        slept.append(datetime.now(UTC))
        await ctx.sleep(2)
        return first

    @jq.task("other")
    async def other(payload: dict[str, Any]) -> None:
        return None

    worker = await start_worker(worker_count=1)  # one slot: the sleep must give it back
    job = await jq.enqueue("nap")
    while (asleep := await jq.get(job.id)) is not None and asleep.status != JobStatus.WAITING:
        await worker.completer.signals.flushed.wait()
    assert asleep is not None
    assert asleep.run_at >= slept[0] + timedelta(seconds=2)
    assert (asleep.worker_id, asleep.attempts) == (None, 0)  # no lease, no attempt spent
    [queue] = await jq.queues()
    assert (queue.waiting, queue.pending, queue.running) == (1, 0, 0)
    # Its slot is free: another job runs on the only one while it sleeps.
    other_job = await jq.enqueue("other")
    assert (await jq.wait(other_job.id, timeout=15)).status == JobStatus.COMPLETED
    assert (await jq.get(job.id)).status == JobStatus.WAITING  # type: ignore[union-attr]

    done = await jq.wait(job.id, timeout=30)
    assert (done.status, done.result, done.attempts) == (
        JobStatus.COMPLETED, "done before the sleep", 1,
    )  # fmt: skip
    assert done.started_at is not None
    assert done.started_at >= asleep.run_at  # the replay began once its time had come
    assert before == [1]  # the step before the sleep ran once, in two runs
    assert [s.name for s in (await jq.detail(job)).steps] == ["before", "sleep-1"]
    [queue] = await jq.queues()
    assert queue.waiting == 0


async def test_a_waiting_job_can_be_cancelled(jq: JobQueue, start_worker: StartWorker) -> None:
    @jq.task("long_nap")
    def long_nap(payload: dict[str, Any], ctx: SyncJobContext) -> None:
        ctx.sleep(3600)  # a sync handler sleeps the same way

    job = await jq.enqueue("long_nap")
    worker = await start_worker()
    while (asleep := await jq.get(job.id)) is not None and asleep.status != JobStatus.WAITING:
        await worker.completer.signals.flushed.wait()
    await jq.cancel(job.id)
    done = await jq.wait(job.id, timeout=15)
    assert done.status == JobStatus.CANCELLED


async def test_sleep_until_takes_an_aware_time(jq: JobQueue, start_worker: StartWorker) -> None:
    @jq.task("naive", max_attempts=1)
    async def naive(payload: dict[str, Any], ctx: JobContext) -> None:
        await ctx.sleep_until(datetime(2030, 1, 1))

    job = await jq.enqueue("naive")
    await start_worker()
    done = await jq.wait(job.id, timeout=15)
    assert done.status == JobStatus.FAILED
    assert "sleep_until takes an aware datetime" in str(done.last_error)
