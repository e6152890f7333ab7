"""A long transaction elsewhere (a session left idle in a transaction, holding the
cluster's xmin back) must not leave the queue counters or the claim index grown for
good, nor make the counts wrong; and folding the counters' changes stays exact
however many writers and leaders run at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.db.records import JobRow
from jobqueue.db.store import Store
from jobqueue.maintenance.compaction import Compaction
from tests.integration.test_queues import reported_counts, true_counts

pytestmark = pytest.mark.anyio

PAGE = 8192
JOBS_HELD = 2000
COUNTERS = ("queue_totals", "queue_count_changes")


def job_row(queue: str = "default") -> JobRow:
    return JobRow(
        type="x", queue=queue, priority=0, max_attempts=3, run_at=None, delay_seconds=None,
        payload="{}",
    )  # fmt: skip


async def run_jobs(store: Store, count: int, queue: str = "default") -> None:
    """``count`` jobs through one at a time: an enqueue, a claim and a completion each,
    three statements per job, as a worker at a low rate writes them."""
    for _ in range(count):
        await store.enqueue(row=job_row(queue))
        claimed = await store.claim(queue=queue, limit=1, worker_id="w", lease_seconds=30)
        await store.complete(jobs=claimed, worker_id="w", status="completed")


async def pgstattuple(db: asyncpg.Connection, schema: str) -> str:
    """The schema of the pgstattuple extension (exact dead tuples, where the statistics
    views lag behind other sessions by up to seconds), created in the test's schema,
    which takes it away again, if the database has none yet."""
    found: str | None = await db.fetchval(
        "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pgstattuple'"
    )
    if found is None:
        await db.execute(f'CREATE EXTENSION pgstattuple SCHEMA "{schema}"')
        return f'"{schema}"'
    return found


async def sizes(db: asyncpg.Connection, schema: str, relation: str) -> tuple[int, int]:
    """A table's or index's size on disk (main fork) and its dead tuples (for an index,
    its deleted pages, which vacuum freed for reuse)."""
    ext = await pgstattuple(db, schema)
    name = f'"{schema}".{relation}'
    if relation.endswith("_idx"):
        row = await db.fetchrow(f"SELECT * FROM {ext}.pgstatindex($1)", name)
        return row["index_size"], row["deleted_pages"]
    row = await db.fetchrow(f"SELECT * FROM {ext}.pgstattuple($1::regclass)", name)
    return row["table_len"], row["dead_tuple_count"]


async def vacuum(db: asyncpg.Connection, schema: str) -> None:
    for table in ("jobs", *COUNTERS):
        await db.execute(f'VACUUM "{schema}".{table}')


async def vacuum_until(
    db: asyncpg.Connection, schema: str, done: Callable[[], Awaitable[bool]]
) -> None:
    """VACUUM our tables until ``done``: another session of a shared server may hold
    the xmin for a moment too, so poll with a deadline rather than trust one run."""
    deadline = time.monotonic() + 30
    await vacuum(db, schema)
    while not await done() and time.monotonic() < deadline:
        await vacuum(db, schema)


async def test_the_counters_and_the_claim_index_come_back_after_a_held_xmin(
    jq: JobQueue, db: asyncpg.Connection, schema: str, pg_dsn: str
) -> None:
    store = await jq.store()
    compaction = Compaction(store)
    await run_jobs(store, 100)
    await compaction.run_once()
    await vacuum(db, schema)
    start = {t: await sizes(db, schema, t) for t in (*COUNTERS, "jobs_claim_idx")}

    holder = await asyncpg.connect(pg_dsn)
    try:
        await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        await holder.fetchval("SELECT txid_current()")
        await run_jobs(store, JOBS_HELD)
        # The leader folds during the hold too: its deletions cannot be vacuumed yet.
        assert await compaction.run_once() >= 2 * JOBS_HELD
        await db.execute(f'VACUUM "{schema}".queue_count_changes')
        held_size, held_dead = await sizes(db, schema, "queue_count_changes")
        assert held_dead >= 2 * JOBS_HELD  # the hold did keep every version
        assert held_size > start["queue_count_changes"][0] + 10 * PAGE
    finally:
        await holder.execute("ROLLBACK")
        await holder.close()

    async def counters_back() -> bool:
        for table in COUNTERS:
            size, dead = await sizes(db, schema, table)
            if size > start[table][0] + PAGE or dead > 10:
                return False
        return True

    await vacuum_until(db, schema, counters_back)
    for table in COUNTERS:
        size, dead = await sizes(db, schema, table)
        assert size <= start[table][0] + PAGE, (table, size, start[table])
        assert dead <= 10, (table, dead)
    assert await reported_counts(jq) == await true_counts(db, schema)

    # The claim index cannot give pages back to the file system without a REINDEX:
    # vacuum deletes its emptied pages and later splits reuse them. So its size is
    # bounded by what the hold kept (an entry per job, well under 64 bytes each), and
    # does not grow further as more jobs run with vacuum keeping up.
    after_hold, _ = await sizes(db, schema, "jobs_claim_idx")
    assert after_hold <= start["jobs_claim_idx"][0] + JOBS_HELD * 64, after_hold
    for _ in range(3):
        await run_jobs(store, JOBS_HELD)
        await vacuum(db, schema)
    later, _ = await sizes(db, schema, "jobs_claim_idx")
    assert later <= after_hold + 2 * PAGE, (after_hold, later)
    _, jobs_dead = await sizes(db, schema, "jobs")
    assert jobs_dead <= 10


async def test_counts_stay_exact_with_concurrent_writers_and_two_leaders_folding(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    store = await jq.store()
    pool = await jq.pool()
    writing = True

    async def writer(queue: str) -> None:
        async with pool.acquire() as conn:
            await run_jobs(store.on(conn), 150, queue)
            await store.on(conn).enqueue_rows(rows=[job_row(queue)] * 20)

    async def leader() -> int:
        folded = 0
        while writing:
            folded += await Compaction(store).run_once()
            await asyncio.sleep(0)
        return folded

    leaders = [asyncio.create_task(leader()) for _ in range(2)]
    await asyncio.gather(*(writer(q) for q in ("mail", "mail", "reports", "default")))
    writing = False
    folded = sum(await asyncio.gather(*leaders))
    assert folded > 0
    expected = await true_counts(db, schema)
    # Two writers share "mail": one may claim the other's job, and find none of its own.
    assert sum(n for (queue, _), n in expected.items() if queue == "mail") == 340
    assert await reported_counts(jq) == expected
    await Compaction(store).run_once()
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".queue_count_changes') == 0
    assert await reported_counts(jq) == expected
