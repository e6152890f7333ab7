"""Limits shared by every worker (docs/limits.md), with 4 real worker processes of 10
slots each: a ledger of when each attempt started and ended, by the database's clock,
shows that no limit is ever exceeded and that every key progresses."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import pytest

from jobqueue import JobQueue
from tests.apps.limits_app import create_spans
from tests.conftest import Process, Spawn

WORKERS = 4
SLOTS = 10

pytestmark = pytest.mark.slow


def start_workers(spawn: Spawn, env: dict[str, str], count: int = WORKERS) -> list[Process]:
    env.update(JOBQUEUE_APP="limits_app:jq", WORKER_COUNT=str(SLOTS))
    workers = [spawn(["worker"], env, name=f"worker{i}") for i in range(count)]
    for w in workers:
        w.wait_for_output("worker started")
    return workers


async def set_limits(dsn: str, schema: str, queue: str, **limits: Any) -> None:
    async with JobQueue(dsn, schema=schema) as jq:
        await jq.set_limits(queue, **limits)


async def fill(
    dsn: str, schema: str, queue: str, payloads: Sequence[dict[str, Any]], *, key: str | None = None
) -> None:
    """Jobs of the task named like ``queue``; ``key``: the payload field that is each
    job's concurrency key."""
    conn = await asyncpg.connect(dsn)
    try:
        await create_spans(conn, schema)
        await conn.execute(
            f"""INSERT INTO "{schema}".jobs (type, queue, payload, concurrency_key)
                SELECT $1, $1, p, CASE WHEN $3::text IS NOT NULL THEN p ->> $3 END
                FROM unnest($2::jsonb[]) AS p""",
            queue, [json.dumps(p) for p in payloads], key,
        )  # fmt: skip
    finally:
        await conn.close()


async def spans(dsn: str, schema: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(
            f'SELECT job_id, attempt, key, started, ended FROM "{schema}".spans ORDER BY started'
        )
    finally:
        await conn.close()


def wait_spans(dsn: str, schema: str, jobs: int, timeout: float = 120) -> list[asyncpg.Record]:
    """The ledger once ``jobs`` attempts have ended."""
    deadline = time.monotonic() + timeout
    while True:
        rows = asyncio.run(spans(dsn, schema))
        if sum(r["ended"] is not None for r in rows) >= jobs:
            return rows
        assert time.monotonic() < deadline, f"{len(rows)} of {jobs} jobs ran"
        time.sleep(0.2)


def most_overlapping(rows: Sequence[asyncpg.Record]) -> int:
    """The most attempts running at one instant. A start at the very time another
    ended counts as overlapping it."""
    events = sorted(
        [(r["started"], 0) for r in rows] + [(r["ended"], 1) for r in rows if r["ended"]]
    )
    running = most = 0
    for _, ended in events:
        running += -1 if ended else 1
        most = max(most, running)
    return most


def most_in_window(starts: Sequence[datetime], window: timedelta) -> int:
    """The most starts within any window of ``window`` (half-open: (t - window, t])."""
    ordered = sorted(starts)
    most = first = 0
    for last, at in enumerate(ordered):
        while ordered[first] <= at - window:
            first += 1
        most = max(most, last - first + 1)
    return most


def test_global_limit_3_never_has_more_than_3_running(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    asyncio.run(set_limits(pg_dsn, schema, "limited", global_limit=3))
    workers = start_workers(spawn, env)
    asyncio.run(fill(pg_dsn, schema, "limited", [{"ms": 10 + i % 20} for i in range(500)]))
    rows = wait_spans(pg_dsn, schema, 500)
    for w in workers:
        assert w.stop() == 0, w.output
    assert len({r["job_id"] for r in rows}) == 500
    assert most_overlapping(rows) == 3
    print(f"\nglobal_limit=3: 500 jobs, at most {most_overlapping(rows)} running at once")


async def enqueue_keyed(dsn: str, schema: str, payloads: Sequence[dict[str, Any]]) -> None:
    """Jobs of the keyed task, whose key is their payload's tenant (as the app says)."""
    async with JobQueue(dsn, schema=schema) as jq:
        jq.task("keyed", queue="keyed", concurrency_key="tenant")(lambda payload: None)
        conn = await asyncpg.connect(dsn)
        try:
            await create_spans(conn, schema)
        finally:
            await conn.close()
        await jq.enqueue_many("keyed", payloads)


def test_20_keys_with_limit_1_never_overlap_and_all_progress(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    asyncio.run(set_limits(pg_dsn, schema, "keyed", key_limit=1))
    workers = start_workers(spawn, env)
    payloads = [{"tenant": f"t{i % 20:02}", "ms": 10 + i % 15} for i in range(400)]
    asyncio.run(enqueue_keyed(pg_dsn, schema, payloads))
    rows = wait_spans(pg_dsn, schema, 400)
    for w in workers:
        assert w.stop() == 0, w.output
    by_key: dict[str, list[asyncpg.Record]] = {}
    for r in rows:
        by_key.setdefault(r["key"], []).append(r)
    assert sorted(by_key) == [f"t{i:02}" for i in range(20)]
    assert {key: most_overlapping(spans) for key, spans in by_key.items()} == dict.fromkeys(
        by_key, 1
    )
    assert {key: len(spans) for key, spans in by_key.items()} == dict.fromkeys(by_key, 20)
    # Every key has started before a quarter of the jobs have ended: none waits for others.
    quarter = sorted(r["ended"] for r in rows)[len(rows) // 4]
    assert all(min(r["started"] for r in spans) < quarter for spans in by_key.values())
    print(f"\nkey_limit=1: 20 keys, 400 jobs, at most {most_overlapping(rows)} running at once")


def test_a_tenant_with_a_long_backlog_does_not_starve_one_with_a_few(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    # Each key may take every slot: only the order of the claims keeps small's turn.
    asyncio.run(set_limits(pg_dsn, schema, "keyed", key_limit=4, global_limit=4))
    big = [{"tenant": "big", "ms": 20} for _ in range(1000)]
    small = [{"tenant": "small", "ms": 20} for _ in range(10)]
    asyncio.run(enqueue_keyed(pg_dsn, schema, big + small))  # the big backlog first
    workers = start_workers(spawn, env, count=2)
    rows = wait_spans(pg_dsn, schema, 100)
    for w in workers:
        assert w.stop() == 0, w.output
    ended = [r for r in rows if r["ended"] is not None]
    small_done = [r for r in ended if r["key"] == "small"]
    assert len(small_done) == 10, f"{len(small_done)} of small's 10 jobs ended"
    assert most_overlapping(rows) <= 4


async def starts(dsn: str, schema: str, queue: str) -> list[datetime]:
    """When each of the queue's jobs started, as the jobs table says."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            f'SELECT started_at FROM "{schema}".jobs WHERE queue = $1 AND started_at IS NOT NULL',
            queue,
        )
        return [r["started_at"] for r in rows]
    finally:
        await conn.close()


def test_rate_50_per_second_for_10_seconds(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    asyncio.run(set_limits(pg_dsn, schema, "rated", rate_limit="50/s"))
    asyncio.run(fill(pg_dsn, schema, "rated", [{"ms": 5} for _ in range(800)]))
    workers = start_workers(spawn, env)
    deadline = time.monotonic() + 60
    while True:
        started = sorted(asyncio.run(starts(pg_dsn, schema, "rated")))
        if started and started[-1] - started[0] >= timedelta(seconds=11):
            break
        assert time.monotonic() < deadline, f"{len(started)} started"
        time.sleep(0.5)
    for w in workers:
        assert w.stop() == 0, w.output
    # The definition: no window of one second, wherever it lies, holds more than 50.
    assert most_in_window(started, timedelta(seconds=1)) == 50
    first_10s = [at for at in started if at < started[0] + timedelta(seconds=10)]
    assert 495 <= len(first_10s) <= 505, len(first_10s)
    print(f"\nrate 50/s: {len(first_10s)} starts in the first 10 s, at most 50 in any 1 s")


async def stored_limits(dsn: str, schema: str, queue: str) -> Any:
    async with JobQueue(dsn, schema=schema) as jq:
        return (await jq.queue(queue)).limits


def test_limits_from_the_environment_are_written_by_each_worker_as_it_starts(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    env["JOBQUEUE_LIMITS"] = "limited:global_limit=3;rated:rate_limit=50/s,key_limit=2"
    [worker] = start_workers(spawn, env, count=1)
    limited = asyncio.run(stored_limits(pg_dsn, schema, "limited"))
    rated = asyncio.run(stored_limits(pg_dsn, schema, "rated"))
    assert worker.stop() == 0, worker.output
    assert (limited.global_limit, limited.rate_limit) == (3, None)
    assert (rated.rate_limit, rated.key_limit) == ("50/s", 2)

    env["JOBQUEUE_LIMITS"] = "limited:global_limit=lots"
    bad = spawn(["worker"], env, name="bad")
    assert bad.popen.wait(30) != 0
    assert "JOBQUEUE_LIMITS: global_limit: must be an integer" in bad.output
