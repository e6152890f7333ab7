"""The executor without PostgreSQL: real tasks and a real completer, writing to the
fake store (tests/unit/fake_store.py). What each way a handler can end is written
as, and what it does to the slots."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from jobqueue.app import JobQueue
from jobqueue.db.records import ClaimedJob
from jobqueue.db.store import Store
from jobqueue.retry import ExponentialBackoff
from jobqueue.worker.completer import Completer
from jobqueue.worker.executor import Executor
from tests.unit.fake_store import FakeStore, Written

pytestmark = pytest.mark.anyio
NOW = datetime.now(UTC)


def job(id: int, type: str, attempt: int = 1) -> ClaimedJob:
    return ClaimedJob(id, type, "default", {"n": id}, attempt, 3, 0, NOW, claim=id)


@dataclass
class Run:
    executor: Executor
    completer: Completer
    store: FakeStore
    retries: list[float]
    freed: list[int]

    async def outcome(self, claimed: ClaimedJob) -> None:
        """Start ``claimed`` and wait until its outcome is written."""
        self.executor.start(claimed)
        await self.executor.signals.finished.wait_for(lambda id: id == claimed.id)
        await self.completer.close(timeout=1)


@pytest.fixture
async def run() -> AsyncIterator[Run]:
    jq = JobQueue()
    gate = asyncio.Event()

    @jq.task("ok")
    async def ok(payload: dict[str, Any]) -> dict[str, Any]:
        return {"doubled": payload["n"] * 2}

    @jq.task("boom")
    async def boom(payload: dict[str, Any]) -> None:
        raise RuntimeError("boom")

    @jq.task("slow", timeout=0.05)
    async def slow(payload: dict[str, Any]) -> None:
        await gate.wait()

    @jq.task("sync")
    def sync(payload: dict[str, Any]) -> int:
        return int(payload["n"]) + 1

    store = FakeStore()
    completer = Completer(cast(Store, store), "w1")
    retries: list[float] = []
    executor = Executor(jq.tasks, 2, completer, ExponentialBackoff(base=10, jitter=0),
                        retries.append)  # fmt: skip
    freed: list[int] = []
    executor.on_slot_freed = lambda: freed.append(executor.free_slots)
    executor.signals.arm()
    writing = asyncio.create_task(completer.run())
    yield Run(executor, completer, store, retries, freed)
    gate.set()
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing


async def test_a_result_is_completed_with_it_from_an_async_and_a_sync_handler(run: Run) -> None:
    await run.outcome(job(1, "ok"))
    await run.outcome(job(2, "sync"))
    assert run.store.written == [Written("complete", [1]), Written("complete", [2])]
    assert run.store.results == {1: {"doubled": 2}, 2: 3}
    assert run.freed == [2, 2]  # each slot given back
    assert run.executor.free_slots == 2


async def test_a_failure_with_attempts_left_is_retried_after_its_backoff(run: Run) -> None:
    await run.outcome(job(3, "boom", attempt=2))
    assert run.store.written == [Written("fail", [3])]
    assert run.retries == [20.0]  # 10 * 2^(2-1): the producer wakes for it


async def test_a_timeout_and_a_type_without_a_handler_fail_the_attempt(run: Run) -> None:
    await run.outcome(job(4, "slow"))
    await run.outcome(job(5, "nobody-handles-this"))
    assert run.store.written == [Written("fail", [4]), Written("fail", [5])]


async def test_a_cancelled_async_handler_ends_cancelled_and_frees_its_slot(run: Run) -> None:
    run.executor.start(job(6, "slow"))
    await run.executor.signals.started.wait()
    assert run.executor.free_slots == 1
    run.executor.cancel(6)
    await run.executor.signals.finished.wait()
    await run.completer.close(timeout=1)
    assert run.store.written == [Written("cancel", [6])]
    assert run.executor.free_slots == 2
