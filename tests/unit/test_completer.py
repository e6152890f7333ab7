"""The completer without PostgreSQL, against a fake of the store (tests/unit/fake_store.py):
what it writes, in how many statements, what it does with a refusal and an outage."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import cast

import pytest

from jobqueue.db.records import ClaimedJob
from jobqueue.db.store import Store
from jobqueue.worker.completer import GATHER_FROM, Completer
from tests.unit.fake_store import FakeStore, Written

pytestmark = pytest.mark.anyio
NOW = datetime.now(UTC)


def job(id: int) -> ClaimedJob:
    return ClaimedJob(id, "t", "default", {}, 1, 3, 0, NOW, claim=id)


@pytest.fixture
async def running() -> AsyncIterator[tuple[Completer, FakeStore]]:
    store = FakeStore()
    completer = Completer(cast(Store, store), "w1", flush_interval=0.05)
    completer.signals.arm()
    task = asyncio.create_task(completer.run())
    yield completer, store
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_lone_outcome_is_written_at_once_in_one_statement(
    running: tuple[Completer, FakeStore],
) -> None:
    completer, store = running
    completer.complete(job(1), '{"ok": true}')
    assert await completer.signals.flushed.wait() == 1
    assert store.written == [Written("complete", [1])]
    assert store.results == {1: {"ok": True}}


async def test_outcomes_of_one_turn_share_a_statement_per_kind(
    running: tuple[Completer, FakeStore],
) -> None:
    completer, store = running
    for i in range(3):
        completer.complete(job(i))
    completer.release(job(10))
    completer.cancel(job(11))
    assert await completer.signals.flushed.wait() == 5
    assert store.written == [
        Written("complete", [0, 1, 2]), Written("release", [10]), Written("cancel", [11]),
    ]  # fmt: skip


async def test_after_a_big_flush_the_next_gathers_what_comes_meanwhile(
    running: tuple[Completer, FakeStore],
) -> None:
    completer, store = running
    for i in range(GATHER_FROM):
        completer.complete(job(i))
    assert await completer.signals.flushed.wait() == GATHER_FROM
    # Outcomes come in numbers: the next flush waits its interval, and takes all three.
    for i in range(100, 103):
        completer.complete(job(i))
        await next_turn()
    assert await completer.signals.flushed.wait() == 3
    assert store.written[-1] == Written("complete", [100, 101, 102])


async def test_a_refused_write_is_logged_and_not_retried(
    running: tuple[Completer, FakeStore], caplog: pytest.LogCaptureFixture
) -> None:
    completer, store = running
    store.refuse = {2}
    with caplog.at_level(logging.WARNING, "jobqueue.completer"):
        completer.complete(job(1))
        completer.complete(job(2))
        assert await completer.signals.flushed.wait() == 2
    assert store.written == [Written("complete", [1, 2])]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert warnings[0].startswith("Stale completion of job 2 attempt 1 rejected")


async def test_an_outage_keeps_every_outcome_until_it_is_written(
    running: tuple[Completer, FakeStore],
) -> None:
    completer, store = running
    store.down = 2
    completer.complete(job(1))
    completer.fail(job(2), "boom", None, delay=5.0)
    assert await completer.signals.flushed.wait(timeout=5) == 2
    assert store.written == [Written("complete", [1]), Written("fail", [2])]
    assert await completer.close(timeout=1)


async def test_close_says_when_the_outcomes_could_not_be_written(
    running: tuple[Completer, FakeStore],
) -> None:
    completer, store = running
    store.down = 10_000
    completer.complete(job(1))
    assert not await completer.close(timeout=0.3)
    assert store.written == []


async def next_turn() -> None:
    """Let the event loop run one turn (the completer's, if it is ready)."""
    loop = asyncio.get_running_loop()
    turn = loop.create_future()
    loop.call_soon(turn.set_result, None)
    await turn
