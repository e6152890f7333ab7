"""The producer without PostgreSQL, against a fake of the store (tests/unit/fake_store.py)
and of the executor: what it asks to claim, for which slots, from where it resumes,
and what wakes it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from jobqueue.db.records import ClaimedJob, ClaimKey
from jobqueue.db.store import Store
from jobqueue.worker.executor import Executor
from jobqueue.worker.producer import Producer
from tests.unit.fake_store import Claimed, FakeStore

pytestmark = pytest.mark.anyio
T0 = datetime(2026, 12, 3, tzinfo=UTC)
MICROSECONDS = 1_000_000


def job(id: int, queue: str = "default") -> ClaimedJob:
    return ClaimedJob(id, "t", queue, {}, 1, 3, 0, T0 + timedelta(seconds=id), claim=id)


class FakeExecutor:
    """Slots, and the jobs started in them."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.started: list[ClaimedJob] = []

    @property
    def free_slots(self) -> int:
        return self.slots - len(self.started)

    def running_in(self, queue: str) -> int:
        return sum(1 for j in self.started if j.queue == queue)

    def start(self, job: ClaimedJob) -> None:
        self.started.append(job)


def producer(
    store: FakeStore, executor: FakeExecutor, queues: tuple[str, ...] = ("default",), **kw: object
) -> Producer:
    return Producer(
        cast(Store, store), cast(Executor, executor), queues=queues, worker_id="w1",
        lease_seconds=30, poll_interval=60, notified_reliably=lambda: True, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


async def test_it_claims_for_the_free_slots_only_and_within_a_queues_limit() -> None:
    store = FakeStore(due={"default": [job(i) for i in range(10)],
                           "mail": [job(i, "mail") for i in range(20, 30)]})  # fmt: skip
    executor = FakeExecutor(slots=5)
    p = producer(store, executor, queues=("default", "mail"), limits={"mail": 2})
    assert await p.claim(p._free()) is True  # every slot filled: there may be more
    # Its turn starts at mail: two (its limit), then default gets the three left.
    assert [(c.queue, c.limit) for c in store.claims] == [("mail", 2), ("default", 3)]
    assert [j.id for j in executor.started] == [20, 21, 0, 1, 2]


async def test_a_claim_resumes_after_the_last_job_until_a_notify_names_one_before_it() -> None:
    store = FakeStore(due={"default": [job(1), job(2)]})
    executor = FakeExecutor(slots=10)
    p = producer(store, executor, types=("t",))
    await p.claim(10)
    store.due["default"] = [job(3)]
    await p.claim(10)
    last = ClaimKey(0, T0 + timedelta(seconds=2), 2)
    assert store.claims == [Claimed("default", 10, None, ("t",)),
                            Claimed("default", 10, last, ("t",))]  # fmt: skip
    # A job queued behind where claims resume (due before job 3): look from the start.
    at_3 = int((T0 + timedelta(seconds=3)).timestamp() * MICROSECONDS)
    p.notified(f"{at_3 - 1} default")
    await p.claim(10)
    assert store.claims[-1].resume_at is None


async def test_a_freed_slot_wakes_it_only_when_it_was_short_of_slots() -> None:
    store = FakeStore(due={"default": [job(i) for i in range(3)]})
    executor = FakeExecutor(slots=2)
    p = producer(store, executor)
    p.signals.arm()
    running = asyncio.create_task(p.run())
    try:
        assert await p.signals.polled.wait() == 2  # two slots, two jobs: short of slots
        await p.signals.asleep.wait()
        executor.started.pop()
        p.slot_freed()
        assert await p.signals.polled.wait() == 1
        await p.signals.asleep.wait()
        executor.started.pop()
        p.slot_freed()  # it filled every slot again: it looks, and finds the queue empty
        assert await p.signals.polled.wait() == 0
        await p.signals.asleep.wait()
        # A pass that found its queue empty with a slot free: a finished job wakes nothing
        # (new jobs say so by NOTIFY).
        executor.started.pop()
        p.slot_freed()
        with pytest.raises(TimeoutError):
            await p.signals.polled.wait(timeout=0.2)
    finally:
        p.stop()
        await running


async def test_an_outage_pauses_claims_and_the_listeners_return_resumes_them() -> None:
    store = FakeStore(due={"default": [job(1)]}, down=1)
    executor = FakeExecutor(slots=2)
    p = producer(store, executor)
    p.signals.arm()
    running = asyncio.create_task(p.run())
    try:
        await store.outage_met.wait()  # the claim that meets the outage
        assert executor.started == []
        p.notified(None)  # the listener is back: so is the database
        assert await p.signals.polled.wait() == 1
        assert [j.id for j in executor.started] == [1]
    finally:
        p.stop()
        await running
