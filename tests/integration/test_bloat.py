"""A long transaction elsewhere (a session left idle in a transaction, holding the
cluster's xmin back) must not leave the queue counters or the claim index grown for
good, nor make the counts wrong; and folding the counters' changes stays exact
however many writers and leaders run at once."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.db.migrate import migrate
from jobqueue.db.records import JobRow
from jobqueue.db.sql import migrations
from jobqueue.db.store import Store
from jobqueue.maintenance.compaction import ROTATE_PAGES, Compaction
from jobqueue.maintenance.leader import Leader
from tests.integration.test_queues import reported_counts, true_counts

pytestmark = pytest.mark.anyio

PAGE = 8192
JOBS_HELD = 2000
# The changes are written to two partitions in turns (migration 0025).
CHANGES = ("queue_count_changes_0", "queue_count_changes_1")
COUNTERS = ("queue_totals", *CHANGES)


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


async def changes_size(db: asyncpg.Connection, schema: str) -> tuple[int, int]:
    """The counter changes' size and dead tuples, both partitions together."""
    both = [await sizes(db, schema, p) for p in CHANGES]
    return sum(size for size, _ in both), sum(dead for _, dead in both)


async def vacuum(db: asyncpg.Connection, schema: str) -> None:
    for table in ("jobs", "queue_totals", "queue_count_changes"):
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


async def fold_all(store: Store) -> int:
    folded = 0
    while n := await store.queue_counts_fold(limit=1000):
        folded += n
    return folded


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
        # (Only the fold: a turn of the partitions would empty one of them.)
        assert await fold_all(store) >= 2 * JOBS_HELD
        await db.execute(f'VACUUM "{schema}".queue_count_changes')
        held_size, held_dead = await changes_size(db, schema)
        assert held_dead >= 2 * JOBS_HELD  # the hold did keep every version
        assert held_size > sum(start[p][0] for p in CHANGES) + 10 * PAGE
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


async def test_the_counters_come_back_while_jobs_keep_running_after_a_held_xmin(
    jq: JobQueue, db: asyncpg.Connection, schema: str, pg_dsn: str
) -> None:
    """Vacuum alone cannot give the changes' pages back under load: rows written as it
    frees pages land all over the file, and it can only cut off an empty end. The
    partitions' turns can (migration 0025): each is truncated once it is idle."""
    store = await jq.store()
    pool = await jq.pool()
    compaction = Compaction(store)
    await run_jobs(store, 100)
    await compaction.run_once()
    holder = await asyncpg.connect(pg_dsn)
    try:
        await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        await holder.fetchval("SELECT txid_current()")
        await run_jobs(store, 3 * JOBS_HELD)
        await fold_all(store)
        held_size, _ = await changes_size(db, schema)
        assert held_size >= 50 * PAGE
    finally:
        await holder.execute("ROLLBACK")
        await holder.close()

    running = True

    async def load(offset: float) -> None:
        """Jobs enqueued in transactions of 0.1 s, as an application's are: two of
        these, staggered, always hold a lock on the changes, which a vacuum needs to
        be free to cut pages off; and their few rows land on pages across the file."""
        await asyncio.sleep(offset)
        async with pool.acquire() as conn:
            while running:
                async with conn.transaction():
                    await store.on(conn).enqueue(row=job_row())
                    await asyncio.sleep(0.1)

    writers = [asyncio.create_task(load(offset)) for offset in (0, 0.05)]
    try:
        # A leader's rounds, each with a VACUUM between them, while the writers go on:
        # two turns of five seconds and a few rounds of slack do for both partitions.
        deadline = time.monotonic() + 30
        size = held_size
        while time.monotonic() < deadline:
            await compaction.run_once()
            await asyncio.sleep(0.5)
            await vacuum(db, schema)
            size, _ = await changes_size(db, schema)
            if size <= 2 * ROTATE_PAGES * PAGE:
                break
    finally:
        running = False
        await asyncio.gather(*writers)
    assert size <= 2 * ROTATE_PAGES * PAGE, (held_size, size)
    await fold_all(store)
    assert await reported_counts(jq) == await true_counts(db, schema)


async def test_a_leader_with_long_rounds_comes_back_when_the_writing_partition_has_grown(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    """A leader whose rounds are a minute apart would find the same partition taking
    writes every time if its rounds fell in step with the turns: one that has grown
    brings the next round forward to its turn's end, and is emptied then."""
    store = await jq.store()
    leader = Leader(store, "w1", lease_seconds=30, interval=60)
    leader.signals.arm()

    async def writing() -> str:
        slot = await db.fetchval(f'SELECT "{schema}".queue_count_slot(now())')
        return CHANGES[slot]

    async def grown() -> list[str]:
        return [p for p in CHANGES if (await sizes(db, schema, p))[0] > ROTATE_PAGES * PAGE]

    # Single-job statements, each a row of changes, until the one taking writes is big.
    while await writing() not in await grown():
        for _ in range(50):
            await store.enqueue_rows(rows=[job_row()])
    running = asyncio.create_task(leader.run())
    try:
        assert await leader.signals.ran.times(2, timeout=15) == [True, True]
        assert await grown() == []
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


async def schema_before(store: Store, version: int) -> None:
    """``store``'s schema made with the migrations before ``version``: as a release
    before that one left it, to upgrade."""
    await store.schema_create()
    await store.migrations_create()
    db = store.db
    assert isinstance(db, asyncpg.Connection)
    async with db.transaction():
        for migration in migrations(store.schema):
            if migration.version < version:
                await db.execute(migration.sql)
                await store.migrations_record(version=migration.version, name=migration.name)


async def test_the_upgrade_to_turns_keeps_the_changes_and_what_roles_were_granted(
    db: asyncpg.Connection,
) -> None:
    """Migration 0025 replaces the changes table by a partitioned one: the changes not
    folded yet are moved, and a role's privileges on the old table (`jobqueue grants`,
    run before the upgrade) are given on the new one."""
    name, role = f"t_{uuid.uuid4().hex[:12]}", f"jq_{uuid.uuid4().hex[:8]}"
    store = Store(db, name)
    try:
        await schema_before(store, 25)
        await db.execute(f'CREATE ROLE "{role}"')
        await db.execute(f'GRANT SELECT, DELETE ON "{name}".queue_count_changes TO "{role}"')
        for queue in ("mail", "mail", "reports"):  # as that schema's code stored them
            await db.execute(
                f"INSERT INTO \"{name}\".jobs (type, queue, payload) VALUES ('t', $1, '{{}}')",
                queue,
            )

        assert (await migrate(db, name))[0] == 25  # and the later ones
        assert await reported_counts_of(db, name) == {"mail": 2, "reports": 1}
        granted = {
            privilege
            for privilege in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE")
            if await db.fetchval(
                "SELECT has_table_privilege($1, $2, $3)",
                role, f'"{name}".queue_count_changes', privilege,
            )
        }  # fmt: skip
        assert granted == {"SELECT", "DELETE"}
        assert await db.fetchval(
            "SELECT has_function_privilege($1, $2, 'EXECUTE')",
            role, f'"{name}".queue_counts_rotate(integer)',
        )  # fmt: skip
    finally:
        await db.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        await db.execute(f'DROP ROLE IF EXISTS "{role}"')


async def reported_counts_of(db: asyncpg.Connection, schema: str) -> dict[str, int]:
    """Pending jobs per queue, as the overview adds them up."""
    rows = await db.fetch(
        f"""SELECT queue, sum(pending)::int AS pending FROM (
                SELECT queue, pending FROM "{schema}".queue_totals
                UNION ALL SELECT queue, pending FROM "{schema}".queue_count_changes) AS c
            GROUP BY queue"""
    )
    return {r["queue"]: r["pending"] for r in rows}


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
