"""Workflows across real worker processes: children of parents that end at the same
moment are released once, and a DAG stays consistent while workers are killed -9."""

from __future__ import annotations

import asyncio
import random
import signal
import time

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.workflows import Node
from tests.apps.ledger_app import create_ledger
from tests.conftest import Process, Spawn

WORKERS = 4


async def query(pg_dsn: str, sql: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(pg_dsn)
    try:
        return await conn.fetch(sql)
    finally:
        await conn.close()


def start_workers(spawn: Spawn, env: dict[str, str]) -> list[Process]:
    workers = [spawn(["worker"], env, name=f"worker{i}") for i in range(WORKERS)]
    for w in workers:
        w.wait_for_output("worker started")
    return workers


def wait_completed(pg_dsn: str, schema: str, count: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        [row] = asyncio.run(
            query(pg_dsn, f"SELECT count(*) AS n FROM \"{schema}\".jobs WHERE status = 'completed'")
        )
        if row["n"] == count:
            return
        assert time.monotonic() < deadline, f"only {row['n']} of {count} jobs completed"
        time.sleep(0.2)


def runs_per_attempt(pg_dsn: str, schema: str) -> list[asyncpg.Record]:
    return asyncio.run(
        query(
            pg_dsn,
            f'SELECT job_id, attempt, count(*) AS n FROM "{schema}".ledger GROUP BY 1, 2',
        )
    )


def edges_out_of_order(pg_dsn: str, schema: str) -> list[asyncpg.Record]:
    """Children that started before one of their parents had completed."""
    return asyncio.run(
        query(
            pg_dsn,
            f"""SELECT e.parent_id, e.child_id
                FROM "{schema}".workflow_edges AS e
                JOIN "{schema}".jobs AS p ON p.id = e.parent_id
                JOIN "{schema}".jobs AS c ON c.id = e.child_id
                WHERE c.started_at < p.finished_at OR p.status <> 'completed'""",
        )
    )


@pytest.mark.slow
def test_two_hundred_two_parent_children_are_each_released_once(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    env.update(JOBQUEUE_APP="ledger_app:jq", WORKER_COUNT="8")
    children = 200

    async def create() -> dict[str, int]:
        conn = await asyncpg.connect(pg_dsn)
        try:
            await create_ledger(conn, schema)
        finally:
            await conn.close()
        async with JobQueue(settings=Settings(database_url=pg_dsn, schema=schema)) as jq:
            wf = jq.workflow("pairs")
            # Parent i is the second parent of child i - 1 and the first of child i:
            # neighbours share a parent, and all parents are claimable at once.
            parents = [wf.add("record", ref=f"p{i}") for i in range(children)]
            for i in range(children):
                wf.add(
                    "record",
                    ref=f"c{i}",
                    depends_on=[parents[i], parents[(i + 1) % children]],
                )
            return (await wf.enqueue()).jobs

    workers = start_workers(spawn, env)
    ids = asyncio.run(create())
    wait_completed(pg_dsn, schema, 2 * children, 120)
    for w in workers:
        assert w.stop() == 0, w.output

    rows = runs_per_attempt(pg_dsn, schema)
    assert {r["job_id"] for r in rows} == set(ids.values())
    assert [r for r in rows if (r["n"], r["attempt"]) != (1, 1)] == []  # each ran once
    counts = asyncio.run(
        query(
            pg_dsn,
            f"""SELECT parents_left, parents_failed, count(*) AS n FROM "{schema}".jobs
                WHERE workflow_ref LIKE 'c%' GROUP BY 1, 2""",
        )
    )
    assert [tuple(r) for r in counts] == [(0, 0, children)]
    assert edges_out_of_order(pg_dsn, schema) == []


@pytest.mark.slow
def test_kill_9_mid_workflow_every_node_completes_each_attempt_run_once(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    env.update(
        JOBQUEUE_APP="ledger_app:jq",
        WORKER_COUNT="4",
        JOBQUEUE_LEASE_SECONDS="2",
        JOBQUEUE_RESCUE_INTERVAL="0.5",
        RETRY_DELAY_SECONDS="0",
        MAX_ATTEMPTS="25",
    )
    rng = random.Random(17)
    layers, width = 8, 50
    kills_wanted = 5

    async def create() -> int:
        conn = await asyncpg.connect(pg_dsn)
        try:
            await create_ledger(conn, schema)
        finally:
            await conn.close()
        async with JobQueue(settings=Settings(database_url=pg_dsn, schema=schema)) as jq:
            wf = jq.workflow("layers")
            previous: list[Node] = []
            for layer in range(layers):
                current = []
                for i in range(width):
                    parents = rng.sample(previous, 2) if previous else []
                    current.append(
                        wf.add(
                            "record_slow",
                            {"ms": rng.randint(50, 300)},
                            ref=f"{layer}.{i}",
                            depends_on=parents,
                            max_attempts=25,
                        )
                    )
                previous = current
            return len((await wf.enqueue()).jobs)

    workers = start_workers(spawn, env)
    total = asyncio.run(create())
    kills = 0
    deadline = time.monotonic() + 240
    next_kill = time.monotonic() + rng.uniform(0.5, 1.2)
    while True:
        [row] = asyncio.run(
            query(pg_dsn, f"SELECT count(*) AS n FROM \"{schema}\".jobs WHERE status = 'completed'")
        )
        if row["n"] == total:
            break
        assert time.monotonic() < deadline, f"only {row['n']} of {total} jobs completed"
        if kills < kills_wanted and time.monotonic() >= next_kill:
            i = rng.randrange(WORKERS)
            workers[i].popen.send_signal(signal.SIGKILL)
            workers[i].popen.wait()
            workers[i] = spawn(["worker"], env, name=f"worker{i}")
            kills += 1
            next_kill = time.monotonic() + rng.uniform(0.5, 1.2)
        time.sleep(0.2)
    for w in workers:
        assert w.stop() == 0, w.output

    rows = runs_per_attempt(pg_dsn, schema)
    assert len({r["job_id"] for r in rows}) == total  # every node ran
    assert [r for r in rows if r["n"] > 1] == []  # no (job, attempt) ran twice
    assert edges_out_of_order(pg_dsn, schema) == []  # no child ran before its parents
    assert kills == kills_wanted
