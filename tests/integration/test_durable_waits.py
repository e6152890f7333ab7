"""Children spawned at run time and signals from outside (docs/durable.md): a parent
waits for its children without holding a slot and is released by the last of them; a
child's failure follows its on_failure; cancelling a waiting parent cancels its
children; a signal reaches its job whether it came before the wait or after."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from typing import Any

import pytest

from jobqueue import JobContext
from jobqueue.app import JobQueue
from jobqueue.context import SyncJobContext
from jobqueue.durable import AttemptLost, ChildFailed, Durable, SignalRefused, SignalTimeout
from jobqueue.durable.children import spawn, wait_for
from jobqueue.durable.signals import wait_for_signal
from jobqueue.enqueue.rows import Rows
from jobqueue.model.job import Job, JobStatus
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio

KEPT_SIGNALS = 'SELECT name FROM "{schema}".job_signals WHERE job_id = $1'


async def until_status(jq: JobQueue, job_id: int, status: JobStatus, seconds: float = 15) -> Job:
    """The job once it is in ``status``: woken by the done channel for a final state,
    else read after each short wait for any job's end."""
    async with asyncio.timeout(seconds):
        while True:
            job = await jq.get(job_id)
            assert job is not None
            if job.status == status:
                return job
            with contextlib.suppress(TimeoutError):
                await jq.wait(job_id, timeout=0.05)


async def test_ten_children_on_one_slot(jq: JobQueue, start_worker: StartWorker) -> None:
    """A parent that spawns 10 children and waits for them completes with one slot:
    its children ran on it, so the parent did not hold it while it waited."""
    spawned: list[list[int]] = []

    @jq.task("resize")
    async def resize(payload: dict[str, Any]) -> str:
        return f"{payload['n']}.png"

    @jq.task("album")
    async def album(payload: dict[str, Any], ctx: JobContext) -> list[Any]:
        children = await ctx.spawn([("resize", {"n": n}) for n in range(10)])
        spawned.append(children)
        return await ctx.wait_for(children)

    job = await jq.enqueue("album")
    await start_worker(worker_count=1)
    done = await jq.wait(job.id, timeout=30)
    assert (done.status, done.result) == (JobStatus.COMPLETED, [f"{n}.png" for n in range(10)])
    assert done.attempts == 1  # waiting spent no attempt
    # The replay after the release got the same ids: nothing was enqueued twice.
    assert len(spawned) >= 2
    assert all(ids == spawned[0] for ids in spawned)
    assert len(await jq.list(type="resize", limit=100)) == 10
    detail = await jq.detail(done)
    assert detail.children is not None
    assert (detail.children.total, detail.children.ended) == (10, 10)
    assert [c.id for c in detail.children.first] == spawned[0]
    child = await jq.get(spawned[0][0])
    assert child is not None
    assert (await jq.detail(child)).spawned_by == job.id
    assert [s.name for s in detail.steps] == ["spawn-1"]


async def test_a_waiting_parent_shows_n_of_m_children(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    gate = asyncio.Event()

    @jq.task("slow_child")
    async def slow_child(payload: dict[str, Any]) -> int:
        if payload["n"] > 0:
            await gate.wait()
        return int(payload["n"])

    @jq.task("parent")
    def parent(payload: dict[str, Any], ctx: SyncJobContext) -> int:  # sync: same API
        return sum(ctx.wait_for(ctx.spawn([("slow_child", {"n": n}) for n in range(3)])))

    job = await jq.enqueue("parent")
    await start_worker(worker_count=4)
    waiting = await until_status(jq, job.id, JobStatus.WAITING)
    async with asyncio.timeout(15):
        while (detail := await jq.detail(waiting)).waiting_for is None or (
            detail.waiting_for.ended != 1
        ):
            waiting = await until_status(jq, job.id, JobStatus.WAITING)
    assert detail.waiting_for is not None
    assert (detail.waiting_for.children, detail.waiting_for.ended) == (3, 1)
    assert waiting.worker_id is None  # no lease held while it waits
    [queue] = [q for q in await jq.queues() if q.name == waiting.queue]
    assert queue.waiting == 1
    gate.set()
    done = await jq.wait(job.id, timeout=15)
    assert (done.status, done.result) == (JobStatus.COMPLETED, 3)


async def test_a_failed_child_cancels_its_parent_and_siblings(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    gate = asyncio.Event()

    @jq.task("fragile", max_attempts=1)
    async def fragile(payload: dict[str, Any]) -> None:
        if payload["fail"]:
            await gate.wait()
            raise RuntimeError("disk full")
        await asyncio.sleep(3600)  # a sibling still running when the other fails

    @jq.task("boss")
    async def boss(payload: dict[str, Any], ctx: JobContext) -> Any:
        kids = await ctx.spawn([("fragile", {"fail": True}), ("fragile", {"fail": False})])
        return await ctx.wait_for(kids)

    job = await jq.enqueue("boss")
    await start_worker(worker_count=4)
    await until_status(jq, job.id, JobStatus.WAITING)
    [failing, sibling] = (await jq.detail(await jq.get(job.id))).children.first  # type: ignore[union-attr]
    await until_status(jq, sibling.id, JobStatus.RUNNING)
    gate.set()
    done = await jq.wait(job.id, timeout=15)
    assert done.status == JobStatus.CANCELLED
    assert done.last_error == f"cancelled: its child job {failing.id} failed or was cancelled"
    # The running sibling was asked to stop, and ended cancelled.
    assert (await jq.wait(sibling.id, timeout=15)).status == JobStatus.CANCELLED
    assert (await jq.get(failing.id)).status == JobStatus.FAILED  # type: ignore[union-attr]


async def test_a_child_that_failed_before_the_wait_cancels_the_parent_at_its_wait(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("quick_failure", max_attempts=1)
    async def quick_failure(payload: dict[str, Any]) -> None:
        raise RuntimeError("bad input")

    @jq.task("scheduled_sibling")
    async def scheduled_sibling(payload: dict[str, Any]) -> None:
        return None

    @jq.task("slow_parent")
    async def slow_parent(payload: dict[str, Any], ctx: JobContext) -> None:
        kids = await ctx.spawn(
            [("quick_failure", {}), ("scheduled_sibling", {}, {"delay_seconds": 3600})]
        )
        failed = await jq.wait(kids[0], timeout=15)  # ended while this run still runs
        assert failed.status == JobStatus.FAILED
        await ctx.wait_for(kids)

    job = await jq.enqueue("slow_parent")
    await start_worker(worker_count=2)
    done = await jq.wait(job.id, timeout=30)
    assert done.status == JobStatus.CANCELLED
    [failed, sibling] = (await jq.detail(done)).children.first  # type: ignore[union-attr]
    assert done.last_error == f"cancelled: its child job {failed.id} failed or was cancelled"
    assert done.attempts == 1  # cancelled by its wait, not failed by it
    # Its sibling, scheduled for later, was cancelled with it.
    assert (await jq.wait(sibling.id, timeout=5)).status == JobStatus.CANCELLED


async def test_with_continue_a_failed_child_is_a_result(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("maybe", max_attempts=1)
    async def maybe(payload: dict[str, Any]) -> int:
        if payload["n"] == 1:
            raise ValueError("no such image")
        return int(payload["n"])

    @jq.task("tolerant")
    async def tolerant(payload: dict[str, Any], ctx: JobContext) -> list[Any]:
        kids = await ctx.spawn([("maybe", {"n": n}) for n in range(3)], on_failure="continue")
        results = await ctx.wait_for(kids)
        return [str(r.error) if isinstance(r, ChildFailed) else r for r in results]

    job = await jq.enqueue("tolerant")
    await start_worker(worker_count=2)
    done = await jq.wait(job.id, timeout=30)
    assert done.status == JobStatus.COMPLETED
    assert (done.result[0], done.result[2]) == (0, 2)
    assert "ValueError: no such image" in done.result[1]


async def test_children_spawn_children(jq: JobQueue, start_worker: StartWorker) -> None:
    @jq.task("leaf")
    async def leaf(payload: dict[str, Any]) -> int:
        return int(payload["n"])

    @jq.task("branch")
    async def branch(payload: dict[str, Any], ctx: JobContext) -> int:
        kids = await ctx.spawn([("leaf", {"n": payload["n"] * 10 + i}) for i in range(2)])
        return sum(await ctx.wait_for(kids))

    @jq.task("root")
    async def root(payload: dict[str, Any], ctx: JobContext) -> int:
        kids = await ctx.spawn([("branch", {"n": n}) for n in (1, 2)])
        return sum(await ctx.wait_for(kids))

    job = await jq.enqueue("root")
    await start_worker(worker_count=1)
    done = await jq.wait(job.id, timeout=30)
    assert (done.status, done.result) == (JobStatus.COMPLETED, 10 + 11 + 20 + 21)


async def test_cancelling_a_waiting_parent_cancels_its_children(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("forever")
    async def forever(payload: dict[str, Any]) -> None:
        await asyncio.sleep(3600)

    @jq.task("later")
    async def later(payload: dict[str, Any]) -> None:
        return None

    @jq.task("holder")
    async def holder(payload: dict[str, Any], ctx: JobContext) -> None:
        # One child runs; the other is scheduled for later, so still pending.
        kids = await ctx.spawn([("forever", {}), ("later", {}, {"delay_seconds": 3600})])
        await ctx.wait_for(kids)

    job = await jq.enqueue("holder")
    await start_worker(worker_count=2)
    await until_status(jq, job.id, JobStatus.WAITING)
    [running, pending] = (await jq.detail(await jq.get(job.id))).children.first  # type: ignore[union-attr]
    await until_status(jq, running.id, JobStatus.RUNNING)
    cancelled = await jq.cancel(job.id)
    assert cancelled.status == JobStatus.CANCELLED
    assert (await jq.wait(pending.id, timeout=5)).status == JobStatus.CANCELLED
    assert (await jq.wait(running.id, timeout=15)).status == JobStatus.CANCELLED
    pending_job = await jq.get(pending.id)
    assert pending_job is not None
    assert pending_job.last_error == f"cancelled: its parent job {job.id} was cancelled"


async def test_spawn_refuses_what_enqueue_refuses(jq: JobQueue, start_worker: StartWorker) -> None:
    @jq.task("bad_spawner", max_attempts=1)
    async def bad_spawner(payload: dict[str, Any], ctx: JobContext) -> None:
        await ctx.spawn([("x", {}, {"priority": "high"})])

    @jq.task("stranger_waiter", max_attempts=1)
    async def stranger_waiter(payload: dict[str, Any], ctx: JobContext) -> None:
        await ctx.wait_for([payload["other"]])

    bad = await jq.enqueue("bad_spawner")
    other = await jq.enqueue("x", run_at=None, delay_seconds=3600)
    stranger = await jq.enqueue("stranger_waiter", {"other": other.id})
    await start_worker()
    failed = await jq.wait(bad.id, timeout=15)
    assert failed.status == JobStatus.FAILED
    assert "spawn: jobs[0]" in (failed.last_error or "")
    assert "priority" in (failed.last_error or "")
    assert await jq.list(type="x", limit=10) == [await jq.get(other.id)]  # nothing stored
    refused = await jq.wait(stranger.id, timeout=15)
    assert "not children of job" in (refused.last_error or "")


async def test_a_signal_sent_before_the_wait_and_one_after_both_arrive(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("approval")
    async def approval(payload: dict[str, Any], ctx: JobContext) -> list[Any]:
        first = await ctx.wait_for_signal("approved")
        second = await ctx.wait_for_signal("shipped", timeout=3600)
        return [first, second]

    job = await jq.enqueue("approval")
    await jq.signal(job.id, "approved", {"by": "ana"})  # before the job ever ran
    await start_worker(worker_count=1)
    waiting = await until_status(jq, job.id, JobStatus.WAITING)
    detail = await jq.detail(waiting)
    assert detail.waiting_for is not None
    assert detail.waiting_for.signal == "shipped"
    assert detail.waiting_for.until is not None  # its time limit
    assert waiting.attempts == 0
    await jq.signal(job.id, "shipped", "1Z999")  # after it waits: wakes it
    done = await jq.wait(job.id, timeout=15)
    assert (done.status, done.result) == (JobStatus.COMPLETED, [{"by": "ana"}, "1Z999"])
    with pytest.raises(SignalRefused) as ended:
        await jq.signal(job.id, "approved")
    assert (ended.value.ended, ended.value.status) == (True, "completed")
    with pytest.raises(SignalRefused) as missing:
        await jq.signal(10**12, "approved")
    assert not missing.value.ended
    with pytest.raises(ValueError, match="NUL character"):
        await jq.signal(job.id, "approved\x00")
    # Signals go with their job.
    store = await jq.store()
    assert len(await store.db.fetch(KEPT_SIGNALS.format(schema=store.schema), job.id)) == 2
    await jq.delete_job(job.id)
    assert await store.db.fetch(KEPT_SIGNALS.format(schema=store.schema), job.id) == []


async def test_a_signal_wait_times_out(jq: JobQueue, start_worker: StartWorker) -> None:
    @jq.task("impatient")
    async def impatient(payload: dict[str, Any], ctx: JobContext) -> str:
        try:
            await ctx.wait_for_signal("approved", timeout=1)
        except SignalTimeout as exc:
            return f"timed out: {exc.name}"
        return "approved"

    job = await jq.enqueue("impatient")
    await start_worker(worker_count=1)
    await until_status(jq, job.id, JobStatus.WAITING)
    done = await jq.wait(job.id, timeout=20)
    assert (done.status, done.result) == (JobStatus.COMPLETED, "timed out: approved")


async def test_a_stale_attempt_spawns_nothing_and_waits_for_nothing(jq: JobQueue) -> None:
    store = await jq.store()
    job = await jq.enqueue("anything")
    [first] = await store.claim(queue="default", limit=1, worker_id="a", lease_seconds=30)
    rows = Rows(jq.tasks, jq.settings)
    run = Durable(store, "a", 65536, rows).run(first)
    # Not due for an hour: the claims below take the parent, not it.
    [child] = await spawn(run, [("thumb", {"n": 1}, {"delay_seconds": 3600})], "cancel")
    # Its lease lapses; the job is rescued and claimed by another worker.
    jq.clock.set(datetime.now().astimezone())
    jq.clock.advance(60)
    assert len(await store.rescue(limit=10)) == 1
    [second] = await store.claim(queue="default", limit=1, worker_id="b", lease_seconds=30)
    assert second.id == job.id
    stale = Durable(store, "a", 65536, rows).run(first)
    # Its first spawn was recorded: read back, as by any replay. Its second is refused.
    assert await spawn(stale, [("thumb", {"n": 1})], "cancel") == [child]
    with pytest.raises(AttemptLost, match=r"its children \('spawn-2'\) were not stored"):
        await spawn(stale, [("thumb", {"n": 2})], "cancel")
    with pytest.raises(AttemptLost, match="did not wait for its children"):
        await wait_for(stale, [child])
    with pytest.raises(AttemptLost, match=r"step .signal-1. was not recorded"):
        await wait_for_signal(stale, "approved", None)
    assert [j.id for j in await jq.list(type="thumb", limit=10)] == [child]  # one child
    current = await jq.get(job.id)
    assert current is not None
    assert (current.status, current.worker_id) == (JobStatus.RUNNING, "b")  # untouched
    # The attempt that holds the job replays the spawn: the same child, none stored.
    assert await spawn(Durable(store, "b", 65536, rows).run(second), [("thumb", {})], "cancel") == [
        child
    ]
