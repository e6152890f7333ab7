"""Concurrent enqueue() calls share INSERTs (jobqueue.enqueue.enqueuer), and each still gets
its own job, or its own error."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.config import Settings

pytestmark = pytest.mark.anyio


async def test_concurrent_calls_share_transactions_and_each_gets_its_own_job(
    jq: JobQueue, db: asyncpg.Connection, settings: Settings
) -> None:
    jobs = await asyncio.gather(
        *(jq.enqueue("share", {"n": n}, priority=n % 3) for n in range(300))
    )
    assert [job.payload for job in jobs] == [{"n": n} for n in range(300)]
    assert [job.priority for job in jobs] == [n % 3 for n in range(300)]
    assert len({job.id for job in jobs}) == 300
    for job in (jobs[0], jobs[150], jobs[299]):
        assert await jq.get(job.id) == job
    # Rows written by one transaction share its xmin: 300 calls, a handful of commits.
    transactions = await db.fetchval(
        f'SELECT count(DISTINCT xmin::text) FROM "{settings.schema}".jobs'
    )
    assert 1 <= transactions <= 10


async def test_the_job_returned_is_the_job_stored_with_every_option(jq: JobQueue) -> None:
    # The INSERT returns only the columns the database chose; the rest of the job
    # returned is built from what was sent (JobRow.stored), so it must not drift from
    # the table's defaults. Alone (enqueue.sql) and shared (enqueue_rows.sql).
    options: dict[str, object] = dict(
        queue="q", priority=4, max_attempts=7, delay_seconds=30, concurrency_key="tenant",
        tags=["a", "b"], meta={"customer": "acme", "n": 1},
    )  # fmt: skip
    alone = await jq.enqueue("every", {"z": 1, "a": [1.5, None]}, **options)  # type: ignore[arg-type]
    shared = await asyncio.gather(
        *(jq.enqueue("every", {"n": n}, **options) for n in range(5)),  # type: ignore[arg-type]
        jq.enqueue("every", None, run_at=alone.run_at),
    )
    for job in (alone, *shared):
        assert await jq.get(job.id) == job
    assert alone.status == "pending"
    assert alone.attempts == 0
    assert alone.tags == ["a", "b"]
    assert alone.meta == {"customer": "acme", "n": 1}


async def test_a_bad_row_fails_only_its_own_call(
    jq: JobQueue, db: asyncpg.Connection, settings: Settings
) -> None:
    payloads: list[dict[str, object]] = [{"n": n} for n in range(20)]
    payloads[7] = {"n": "\u0000"}  # valid JSON, but jsonb refuses a NUL character
    results = await asyncio.gather(
        *(jq.enqueue("mixed", p) for p in payloads), return_exceptions=True
    )
    failed = [i for i, r in enumerate(results) if isinstance(r, BaseException)]
    assert failed == [7]
    assert isinstance(results[7], asyncpg.UntranslatableCharacterError)
    stored = await db.fetch(f'SELECT payload FROM "{settings.schema}".jobs ORDER BY id')
    assert [r["payload"] for r in stored] == [f'{{"n": {n}}}' for n in range(20) if n != 7]


async def test_a_cancelled_call_does_not_disturb_the_others(jq: JobQueue) -> None:
    calls = [asyncio.ensure_future(jq.enqueue("c", {"n": n})) for n in range(50)]
    calls[10].cancel()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert isinstance(results[10], asyncio.CancelledError)
    others = [r for i, r in enumerate(results) if i != 10]
    assert all(not isinstance(r, BaseException) for r in others)
    assert len({r.id for r in others if not isinstance(r, BaseException)}) == 49
