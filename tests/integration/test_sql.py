"""Every query is prepared against a freshly migrated schema (a renamed column fails here,
not in production), and migrations apply once however many processes start together."""

from __future__ import annotations

import asyncio
import json

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.db.migrate import migrate
from jobqueue.db.sql import QUERY_NAMES, migrations, queries

pytestmark = pytest.mark.anyio


async def add_finished_jobs(db: asyncpg.Connection, schema: str, count: int) -> None:
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type, status, finished_at)
            SELECT 'noop', 'completed', now() FROM generate_series(1, $1)""",
        count,
    )


async def add_pending_jobs(db: asyncpg.Connection, schema: str, count: int) -> None:
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type) SELECT 'noop' FROM generate_series(1, $1)""",
        count,
    )


async def test_every_query_prepares(db: asyncpg.Connection, schema: str) -> None:
    q = queries(schema)
    for name in QUERY_NAMES:
        try:
            await db.prepare(getattr(q, name))
        except asyncpg.PostgresError as exc:  # pragma: no cover - the failure message
            pytest.fail(f"query {name}.sql does not prepare: {exc}")


async def test_migrations_apply_once_under_concurrent_starts(pg_dsn: str) -> None:
    schema = "t_concurrent_migrate"
    conns = [await asyncpg.connect(pg_dsn) for _ in range(10)]
    try:
        await conns[0].execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        applied = await asyncio.gather(*(migrate(c, schema) for c in conns))
        assert sorted(v for versions in applied for v in versions) == [
            m.version for m in migrations(schema)
        ]
        rows = await conns[0].fetch(f'SELECT version FROM "{schema}".jobqueue_migrations')
        assert len(rows) == len(migrations(schema))
        assert await migrate(conns[0], schema) == []
    finally:
        await conns[0].execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        for c in conns:
            await c.close()


async def test_claim_reads_the_pending_index_not_finished_jobs(
    db: asyncpg.Connection, schema: str
) -> None:
    await add_finished_jobs(db, schema, 20000)
    await db.execute(f'ANALYZE "{schema}".jobs')
    rows = await db.fetch("EXPLAIN " + queries(schema).claim, "default", 10, "w", 30.0, *[None] * 5)
    plan = "\n".join(r[0] for r in rows)
    assert "jobs_claim_idx" in plan, plan
    assert "Seq Scan" not in plan, plan


async def test_drain_check_probes_indexes_behind_finished_jobs(
    db: asyncpg.Connection, schema: str
) -> None:
    """testing.drain() asks after every step whether work is left. Written as EXISTS, the
    planner expected a pending row within the first pages and scanned the table for it:
    behind a history of finished jobs, the whole table on every call."""
    await add_finished_jobs(db, schema, 20000)
    await add_pending_jobs(db, schema, 2000)
    await db.execute(f'ANALYZE "{schema}".jobs')
    rows = await db.fetch("EXPLAIN " + queries(schema).jobs_due_or_running, None)
    plan = "\n".join(r[0] for r in rows)
    assert "Seq Scan" not in plan, plan
    assert await db.fetchval(queries(schema).jobs_due_or_running, None) is True


# What a fenced write changes in the rows it accepts (default: ends the attempt).
# How each write shows on the rows it changed (fail and release clear the worker).
CHANGED = {
    "complete": "status = 'completed'",
    "complete_leased": "status = 'completed'",
    "heartbeat": "lease_expires_at < now() + interval '1 minute'",
    "progress": "progress IS NOT NULL",
}


@pytest.mark.parametrize("plan_mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize(
    ("name", "types", "args"),
    [
        # The last parameter of each is the clock: NULL, the database's now().
        (
            "complete",
            "bigint[], jsonb, text, text, text, jsonb, timestamptz",
            ", 'completed', NULL, NULL, NULL",
        ),
        ("complete_leased", "bigint[], jsonb, text, jsonb, timestamptz", ", NULL, NULL"),
        ("fail", "bigint[], jsonb, text, timestamptz", ", NULL"),
        ("release", "bigint[], jsonb, text, timestamptz", ", NULL"),
        ("heartbeat", "bigint[], jsonb, text, float8, timestamptz", ", 30, NULL"),
        ("progress", "bigint[], jsonb, text, timestamptz", ", NULL"),
    ],
)
async def test_fenced_writes_look_jobs_up_by_primary_key(
    db: asyncpg.Connection, schema: str, plan_mode: str, name: str, types: str, args: str
) -> None:
    """The shape that once took 8 s for 1,500 jobs: statistics gathered while worker_id
    was NULL almost everywhere (finished and pending jobs), then thousands of jobs
    running for one worker. A fenced write must still be one primary-key lookup per
    job, never a table scan nor a loop over the batch for every row."""
    await add_finished_jobs(db, schema, 20000)
    await add_pending_jobs(db, schema, 5000)
    await db.execute(f'ANALYZE "{schema}".jobs')
    ids = await db.fetch(
        f"""UPDATE "{schema}".jobs
            SET status = 'running', attempts = 1, worker_id = 'w', claim_token = 7,
                lease_expires_at = now() + interval '1 hour'
            WHERE status = 'pending' RETURNING id"""
    )
    # The first job's claim is stale: the fence must leave that row alone.
    claims = {str(r["id"]): (8 if i == 0 else 7) for i, r in enumerate(ids[:1500])}
    held: dict[str, object] = dict(claims)
    if name == "fail":
        held = {k: {"claim": c, "error": "e", "delay": None} for k, c in claims.items()}
    if name == "progress":
        held = {k: {"claim": c, "fraction": 0.5, "message": None} for k, c in claims.items()}
    await db.execute(f"SET plan_cache_mode = {plan_mode}")
    await db.execute(f"PREPARE plan_test({types}) AS {getattr(queries(schema), name)}")
    id_list = "ARRAY[" + ",".join(claims) + "]::bigint[]"
    rows = await db.fetch(
        f"EXPLAIN (ANALYZE, COSTS OFF) "
        f"EXECUTE plan_test({id_list}, '{json.dumps(held)}'::jsonb, 'w'{args})"
    )
    plan = "\n".join(r[0] for r in rows)
    assert "Seq Scan" not in plan, plan
    assert "Join Filter" not in plan, plan
    assert "Index Scan using jobs_pkey" in plan, plan
    changed = await db.fetchval(
        f"""SELECT count(*) FROM "{schema}".jobs
            WHERE {CHANGED.get(name, "worker_id IS NULL")}
              AND id = ANY($1::bigint[])""",
        [int(k) for k in claims],
    )
    assert changed == 1499


@pytest.mark.parametrize("seqscan", ["off", "on"])
async def test_plans_made_on_a_tiny_table_stay_index_lookups_as_it_grows(
    db: asyncpg.Connection, schema: str, seqscan: str
) -> None:
    """A generic plan is cached once a statement has run five times, and kept until
    something invalidates it. Made while the jobs table was a few pages, the claim's and
    the completion's lookups were sequential scans, and stayed so as a held xmin grew
    the table: 5 ms a claim after a minute of one. Our sessions take no sequential scan
    where an index serves (db/pool.py), so the cached plans stay lookups; with
    sequential scans allowed (the control) the same plans are scans of the grown table."""
    q = queries(schema)
    await add_pending_jobs(db, schema, 3)
    await db.execute(f'VACUUM ANALYZE "{schema}".jobs')  # a table known to be tiny
    await db.execute(f"SET enable_seqscan = {seqscan}")
    await db.execute("SET plan_cache_mode = force_generic_plan")  # the worst case
    claim = "text, integer, text, float8, timestamptz, integer, timestamptz, bigint, text[]"
    await db.execute(f"PREPARE claim_test({claim}) AS {q.claim}")
    complete = "bigint[], jsonb, text, text, text, jsonb, timestamptz"
    await db.execute(f"PREPARE complete_test({complete}) AS {q.complete}")
    claim_args = "'default', {}, 'w', 30, NULL, NULL, NULL, NULL, NULL"
    complete_args = "ARRAY[{}]::bigint[], '{{}}', 'w', 'completed', NULL, NULL, NULL"
    for _ in range(6):
        await db.execute(f"EXECUTE claim_test({claim_args.format(1)})")
        await db.execute(f"EXECUTE complete_test({complete_args.format(1)})")
    await add_pending_jobs(db, schema, 20000)  # no ANALYZE: the cached plans stay
    plans = [
        "\n".join(r[0] for r in await db.fetch(f"EXPLAIN (COSTS OFF) EXECUTE {execute}"))
        for execute in (
            f"claim_test({claim_args.format(10)})",
            f"complete_test({complete_args.format(5)})",
        )
    ]
    scans = [plan for plan in plans if "Seq Scan on jobs" in plan]
    if seqscan == "off":
        assert not scans, plans
        assert "Tid Scan on jobs" in plans[0], plans[0]
        assert "Index Scan using jobs_pkey" in plans[1], plans[1]
    else:
        assert scans, plans


async def test_pooled_sessions_take_no_sequential_scan(jq: JobQueue) -> None:
    pool = await jq.pool()
    async with pool.acquire() as conn:
        assert await conn.fetchval("SHOW enable_seqscan") == "off"
        assert await conn.fetchval("SHOW plan_cache_mode") == "auto"


@pytest.mark.parametrize("handled", [1, 50])
async def test_a_typed_claim_passes_over_other_types_on_the_claim_index(
    db: asyncpg.Connection, schema: str, handled: int
) -> None:
    """A worker's claim takes only its handlers' types (1 or 50 of them), with a generic
    plan, behind a history of finished jobs and a backlog of another type ahead of its
    own: an index scan of the claim index, the type read from each row it points to,
    never a scan of the table."""
    await add_finished_jobs(db, schema, 20000)
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type) SELECT 'theirs' FROM generate_series(1, 5000)"""
    )
    await add_pending_jobs(db, schema, 1000)  # noop, behind them
    await db.execute(f'ANALYZE "{schema}".jobs')
    types = ["noop", *(f"type_{n}" for n in range(handled - 1))]
    await db.execute("SET plan_cache_mode = force_generic_plan")
    claim = "text, integer, text, float8, timestamptz, integer, timestamptz, bigint, text[]"
    await db.execute(f"PREPARE typed_claim({claim}) AS {queries(schema).claim}")
    transaction = db.transaction()
    await transaction.start()
    try:
        array = "ARRAY[" + ",".join(f"'{t}'" for t in types) + "]"  # EXECUTE takes no $n
        plan = "\n".join(
            r[0]
            for r in await db.fetch(
                "EXPLAIN (ANALYZE, COSTS OFF) EXECUTE typed_claim"
                f"('default', 10, 'w', 30, NULL, NULL, NULL, NULL, {array})"
            )
        )
        claimed = await db.fetch(f"""SELECT type FROM "{schema}".jobs WHERE status = 'running'""")
    finally:
        await transaction.rollback()
    assert "Index Scan using jobs_claim_idx" in plan, plan
    assert "Seq Scan" not in plan, plan
    assert "Sort" not in plan, plan  # the index's order: no backlog read whole and sorted
    assert [r["type"] for r in claimed] == ["noop"] * 10


async def test_the_count_of_jobs_waiting_for_a_handler_reads_a_bounded_front(
    db: asyncpg.Connection, schema: str
) -> None:
    """queue_unhandled.sql finds the queues with pending jobs one probe of the claim
    index each and reads at most its window of pending jobs per queue, in claim order:
    a bounded read, whatever the backlog, and no index that an enqueue pays for."""
    await add_finished_jobs(db, schema, 20000)
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type, priority) SELECT 'typo', 0
            FROM generate_series(1, 3)"""
    )
    await add_pending_jobs(db, schema, 5000)  # noop: handled below, behind the typos
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type, queue) SELECT 'typo', 'other'
            FROM generate_series(1, 2)"""
    )
    await db.execute(
        f"""INSERT INTO "{schema}".workers (id, host, pid, queues, slots, types, any_type)
            VALUES ('w', 'h', 1, '{{default}}', 5, '{{noop}}', false)"""
    )
    await db.execute(f'ANALYZE "{schema}".jobs')
    q = queries(schema).queue_unhandled
    assert [tuple(r) for r in await db.fetch(q, 30.0, None, 10_000)] == [
        ("default", "typo", 3),
        ("other", "typo", 2),  # no worker serves it at all
    ]
    text = "\n".join(r[0] for r in await db.fetch("EXPLAIN (COSTS OFF) " + q, 30.0, None, 100))
    assert "Seq Scan on jobs" not in text, text
    assert "jobs_claim_idx" in text, text
    rows = await db.fetch("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + q, 30.0, None, 100)
    top = json.loads(rows[0][0])[0]["Plan"]
    # A window of 100: about that many heap pages at most, not the 5,000 handled jobs
    # behind them nor the 20,000 finished ones.
    assert int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"]) < 150, top


async def test_the_leaders_look_at_the_schedules_reads_only_enabled_ones_by_index(
    db: asyncpg.Connection, schema: str
) -> None:
    """Once a second on the leader: the earliest enabled tick, then the due ones. With
    thousands of schedules, most paused, neither reads the table."""
    await db.execute(
        f'INSERT INTO "{schema}".schedules (name, type, every_seconds, enabled, next_run_at) '
        "SELECT 's' || i, 'report', 60, i % 50 = 0, now() + i * interval '1 second' "
        "FROM generate_series(1, 20000) AS i"
    )
    await db.execute(f'ANALYZE "{schema}".schedules')
    for sql, args in [
        (queries(schema).schedules_next_in, [None]),
        (queries(schema).schedules_due, [None, 100]),
    ]:
        plan = "\n".join(r[0] for r in await db.fetch("EXPLAIN " + sql, *args))
        assert "schedules_due_idx" in plan, plan
        assert "Seq Scan" not in plan, plan
    # The leader's per-second probe looks at both, and at the waiting jobs by their index.
    await add_finished_jobs(db, schema, 20000)
    await db.execute(f'ANALYZE "{schema}".jobs')
    plan = "\n".join(r[0] for r in await db.fetch("EXPLAIN " + queries(schema).leader_due, None))
    assert "schedules_due_idx" in plan, plan
    assert "jobs_wake_idx" in plan, plan
    assert "Seq Scan" not in plan, plan


async def test_a_parents_children_and_signals_are_read_by_their_indexes(
    db: asyncpg.Connection, schema: str
) -> None:
    """ctx.wait_for locks and counts one parent's children, GET /jobs/{id} lists them,
    ctx.wait_for_signal takes one job's Nth signal, and the leader wakes the jobs whose
    time has come: each by its index, among 20,000 finished jobs, 2,000 children of
    other parents and 500 jobs waiting for their children (which wake.sql never reads)."""
    await add_finished_jobs(db, schema, 20000)
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type, spawned_by, status, finished_at)
            SELECT 'child', i % 500 + 1, 'completed', now() FROM generate_series(1, 2000) AS i"""
    )
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type, status, awaiting, children_left)
            SELECT 'parent', 'waiting', 'children', 4 FROM generate_series(1, 500)"""
    )
    await db.execute(
        f"""INSERT INTO "{schema}".job_signals (job_id, name)
            SELECT i % 500 + 1, 'approved' FROM generate_series(1, 2000) AS i"""
    )
    await db.execute(f'ANALYZE "{schema}".jobs')
    await db.execute(f'ANALYZE "{schema}".job_signals')
    q = queries(schema)
    for sql, args, index in [
        (q.children_wait, [7, [8], "w", 1, None], "jobs_spawned_by_idx"),
        (q.job_children, [7, 100], "jobs_spawned_by_idx"),
        (q.signal_wait, [7, "approved", 2, None, None], "job_signals_job_idx"),
        (q.wake, [100, None], "jobs_wake_idx"),
    ]:
        plan = "\n".join(r[0] for r in await db.fetch("EXPLAIN (COSTS OFF) " + sql, *args))
        assert index in plan, plan
        assert "Seq Scan on jobs" not in plan, plan
        assert "Seq Scan on job_signals" not in plan, plan
