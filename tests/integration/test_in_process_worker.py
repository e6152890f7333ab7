"""``async with jq.worker():`` runs a worker in the caller's event loop, as an
application's lifespan or a test does, and stops it as ``jobqueue worker`` stops."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jobqueue.app import JobQueue
from jobqueue.config import ConfigError
from jobqueue.model.job import JobStatus

pytestmark = pytest.mark.anyio

SERVICES = {"completer", "progress", "listener", "heartbeat", "leader", "producer"}


def worker_tasks() -> set[str]:
    return {t.get_name() for t in asyncio.all_tasks()} & SERVICES


async def test_started_and_stopped_twice_in_one_event_loop(jq: JobQueue) -> None:
    ran: list[int] = []

    @jq.task("note")
    async def note(payload: dict[str, Any]) -> None:
        ran.append(payload["n"])

    for round in (1, 2):
        async with jq.worker(queues=["default"], concurrency=3) as worker:
            assert worker_tasks() == SERVICES
            [info] = await jq.workers()
            assert (info.id, info.slots) == (worker.id, 3)
            job = await jq.enqueue("note", {"n": round})
            assert (await jq.wait(job.id, timeout=10)).status == JobStatus.COMPLETED
        assert worker_tasks() == set()  # nothing left running
        assert await jq.workers() == []  # and it said goodbye
    assert ran == [1, 2]


async def test_leaving_the_block_lets_a_running_job_finish(jq: JobQueue) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @jq.task("slow")
    async def slow(payload: dict[str, Any]) -> str:
        started.set()
        await release.wait()
        return "finished"

    job = await jq.enqueue("slow")
    async with jq.worker() as worker:
        await started.wait()
        # The graceful stop waits for it; let it end once the stop has begun.
        asyncio.get_running_loop().call_soon(release.set)
    assert worker.executor.running == 0
    done = await jq.get(job.id)
    assert done is not None
    assert (done.status, done.result) == (JobStatus.COMPLETED, "finished")


async def test_bad_arguments_name_themselves(jq: JobQueue) -> None:
    with pytest.raises(ConfigError, match="concurrency must be a positive integer, got 0"):
        async with jq.worker(concurrency=0):
            pass
    with pytest.raises(ConfigError, match="queues must be a comma-separated list"):
        async with jq.worker(queues=["mail=ten"]):
            pass
    assert worker_tasks() == set()
