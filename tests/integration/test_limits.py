"""The claim of a limited queue on the test clock: the rate's window slides, and the
limits hold through pause, rescue, cancellation and retries (docs/limits.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.db.records import ClaimedJob, Failure
from jobqueue.db.sql import queries
from jobqueue.db.store import Store
from jobqueue.model.job import JobStatus
from jobqueue.worker import limited_claim

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


async def claim(jq: JobQueue, queue: str, wanted: int = 10, worker: str = "w1") -> list[ClaimedJob]:
    async with (await jq.store()).connection() as store:
        return await limited_claim.claim(
            store, queue=queue, limit=wanted, worker_id=worker, lease_seconds=30
        )


async def fill(jq: JobQueue, queue: str, count: int, key: str | None = None) -> None:
    for _ in range(count):
        await jq.enqueue("x", queue=queue, concurrency_key=key)


async def test_the_rate_window_slides_it_is_not_a_fixed_bucket(jq: JobQueue) -> None:
    jq.clock.set(T0)
    await jq.set_limits("api", rate_limit="2/s")
    await fill(jq, "api", 10)
    # Starts at 0, 0.5, 0.999999 and 1.0 s: two may start in any second, wherever it
    # begins; the starts at 0 leave the window that ends at 1.0 exactly then.
    for step, allowed in [(0, 2), (0.5, 0), (0.499999, 0), (0.000001, 2), (0.5, 0), (0.5, 2)]:
        jq.clock.advance(step)
        got = await claim(jq, "api")
        assert len(got) == allowed, (step, len(got))
    info = (await jq.queue("api")).limits
    assert info is not None
    assert (info.rate_in_use, info.rate_waiting) == (2, 4)


async def test_a_paused_limited_queue_starts_nothing(jq: JobQueue) -> None:
    await jq.set_limits("mail", global_limit=5)
    await fill(jq, "mail", 3)
    await jq.pause("mail")
    assert await claim(jq, "mail") == []
    await jq.resume("mail")
    assert len(await claim(jq, "mail")) == 3


async def test_a_limited_queue_is_not_claimed_by_the_unlimited_claim(jq: JobQueue) -> None:
    await jq.set_limits("mail", global_limit=1)
    await fill(jq, "mail", 3)
    store = await jq.store()
    assert await store.claim(queue="mail", limit=10, worker_id="w", lease_seconds=30) == []
    assert len(await claim(jq, "mail")) == 1


async def test_a_lost_workers_slots_come_back_when_its_jobs_are_rescued(jq: JobQueue) -> None:
    jq.clock.set(T0)
    await jq.set_limits("mail", global_limit=2)
    await fill(jq, "mail", 5)
    assert len(await claim(jq, "mail", worker="lost")) == 2
    assert await claim(jq, "mail", worker="other") == []
    jq.clock.advance(31)  # the lost worker's leases run out
    assert len(await (await jq.store()).rescue(limit=10)) == 2
    assert len(await claim(jq, "mail", worker="other")) == 2


async def test_cancelled_and_retried_jobs_hold_their_slot_only_while_running(
    jq: JobQueue,
) -> None:
    jq.clock.set(T0)
    await jq.set_limits("mail", global_limit=1)
    await fill(jq, "mail", 3)
    store: Store = await jq.store()
    [first] = await claim(jq, "mail")
    await store.fail(failures=[Failure(first, "boom", None, 60.0)], worker_id="w1")
    [second] = await claim(jq, "mail")  # the retry waits 60 s, pending: no slot held
    assert second.id != first.id
    await jq.cancel(second.id)  # asked to stop: it runs until its worker ends it
    assert await claim(jq, "mail") == []
    await store.complete(jobs=[second], worker_id="w1", status=JobStatus.CANCELLED)
    [third] = await claim(jq, "mail")
    assert third.id not in (first.id, second.id)


async def test_key_limits_and_key_rates(jq: JobQueue) -> None:
    jq.clock.set(T0)
    await jq.set_limits("tenants", key_limit=1)
    await fill(jq, "tenants", 3, key="a")
    await fill(jq, "tenants", 3, key="b")
    await fill(jq, "tenants", 2)  # no key: limited by the queue's limits alone
    got = await claim(jq, "tenants")
    assert len(got) == 4
    info = (await jq.queue("tenants")).limits
    assert info is not None
    assert (info.keys_at_limit, info.key_waiting) == (2, 4)

    await jq.set_limits("tenants", key_limit=None, key_rate_limit="1/s")
    assert len(await claim(jq, "tenants")) == 2  # a and b, one start each in this second
    jq.clock.advance(0.5)
    assert await claim(jq, "tenants") == []
    jq.clock.advance(0.5)
    assert len(await claim(jq, "tenants")) == 2


async def test_a_keyed_claim_steps_from_key_to_key_on_the_indexes(
    db: asyncpg.Connection, schema: str
) -> None:
    """20,000 pending jobs over 1,000 keys behind 20,000 finished ones: a claim of 10
    reads a few hundred buffers, whatever the backlog, and no table scan."""
    await db.execute(f"""INSERT INTO "{schema}".queues (name, key_limit, global_limit)
                         VALUES ('tenants', 1, 100), ('mail', NULL, 5)""")
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type, status, attempts, finished_at)
            SELECT 'x', 'completed', 1, now() FROM generate_series(1, 20000)"""
    )
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type, queue, concurrency_key)
            SELECT 'x', 'tenants', 't' || (g % 1000) FROM generate_series(1, 20000) AS g
            UNION ALL SELECT 'x', 'mail', NULL FROM generate_series(1, 2000)"""
    )
    await db.execute(f'ANALYZE "{schema}".jobs')
    for queue in ("tenants", "mail"):
        transaction = db.transaction()
        await transaction.start()
        try:
            await db.execute(f"""UPDATE "{schema}".queues SET key_cursor = 't500'""")
            plan = await db.fetchval(
                "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + queries(schema).claim_limited,
                queue, 10, "w", 60.0, None, None,
            )  # fmt: skip
        finally:
            await transaction.rollback()
        top = json.loads(plan)[0]["Plan"]
        assert top["Actual Rows"] == (10 if queue == "tenants" else 5)
        scans = {(n["Node Type"], n.get("Relation Name")) for n in nodes(top)}
        assert ("Seq Scan", "jobs") not in scans, queue
        assert ("Bitmap Heap Scan", "jobs") not in scans, queue
        assert int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"]) < 600, queue


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


async def test_a_unique_job_carries_its_concurrency_key(jq: JobQueue) -> None:
    await jq.set_limits("mail", key_limit=1)
    first = await jq.enqueue("x", queue="mail", unique_key="report-1", concurrency_key="acme")
    again = await jq.enqueue("x", queue="mail", unique_key="report-1", concurrency_key="acme")
    assert again.id == first.id  # the holder, not a second job
    await fill(jq, "mail", 2, key="acme")
    got = await jq.get(first.id)
    assert got is not None
    assert got.concurrency_key == "acme"
    assert len(await claim(jq, "mail")) == 1  # one of acme's three at a time


async def test_a_given_concurrency_key_is_stored_from_a_task_and_a_batch(jq: JobQueue) -> None:
    """Task.enqueue_async and enqueue_many take the key as JobQueue.enqueue does: the
    given key wins over the task's payload field, for each job of a batch."""

    @jq.task("keyed", concurrency_key="tenant")
    async def keyed(payload: dict[str, Any]) -> None:
        return None

    one = await keyed.enqueue_async({"tenant": "from-payload"}, concurrency_key="tenant-a")
    batch = await jq.enqueue_many("keyed", [{"tenant": "x"}, {}], concurrency_key="tenant-b")
    own = await jq.enqueue_many("keyed", [{"tenant": "c"}])
    stored = {job.id: job.concurrency_key for job in await jq.list(limit=10)}
    assert stored == {one.id: "tenant-a", batch[0]: "tenant-b", batch[1]: "tenant-b",
                      own[0]: "c"}  # fmt: skip
    with pytest.raises(ValueError, match="concurrency_key"):
        await jq.enqueue_many("keyed", [{}], concurrency_key="")
    assert len(await jq.list(limit=10)) == 4  # nothing stored
