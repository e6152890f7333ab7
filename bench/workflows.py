"""Workflow figures (docs/workflows.md), run by bench/jobqueue_runner.py.

`workflow_fanout` and `workflow_chain` are the harness's `drain` with the jobs made by
one workflow instead of `enqueue_many` (JQBENCH_WORKFLOW carries the shape to
`fill`): one parent, N - 2 children and a callback waiting for all of them; or a
chain of N, each job waiting for the one before. bench/run.py reports each against
drain_1proc measured in the same round.

`workflow_release` times what a completion costs the database when it releases
children, without workers: N-node workflows are stored, 1,000 of their jobs claimed,
then completed in batches of 100 (as the completer writes them), each batch one
`complete` statement timed, against the same for as many jobs outside workflows
(plain). Two shapes: a chord, whose 1,000 completions each count down the one
callback (the hottest row a workflow has), and a fan-out, whose one parent's
completion releases N - 1 children (reported per child released). Flat figures
across sizes mean a completion touches its own children only, whatever the
workflow's size.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import asyncpg

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.db.migrate import migrate
from jobqueue.db.store import Store
from jobqueue.model.job import JobStatus
from jobqueue.workflows import step

SCHEMA = "jobqueue"
SAMPLE = 1000
BATCH = 100
WORKER = "bench-release"


async def fill(jq: JobQueue, shape: str, count: int) -> None:
    """``count`` jobs in one workflow of ``shape`` (fanout or chain), untimed."""
    wf = jq.workflow(f"bench-{shape}")
    if shape == "fanout":
        parent = wf.add("bench", ref="parent")
        children = wf.group(*(step("bench") for _ in range(count - 2)), depends_on=[parent])
        wf.add("bench", ref="callback", depends_on=children)
    elif shape == "chain":
        wf.chain(*(step("bench") for _ in range(count)))
    else:
        raise ValueError(f"JQBENCH_WORKFLOW must be fanout or chain, got {shape!r}")
    await wf.enqueue()


async def release(dsn: str, sizes: list[int], rounds: int) -> dict[str, Any]:
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
    await migrate(conn, SCHEMA)
    settings = Settings(database_url=dsn, schema=SCHEMA, log_level="warning")
    result: dict[str, Any] = {"sample": SAMPLE, "batch": BATCH}
    async with JobQueue(settings=settings) as jq:
        store = await jq.store()
        for size in sizes:
            plain = [await _plain(conn, jq, store, size) for _ in range(rounds)]
            result[f"plain_{size}_us_per_completion"] = round(statistics.median(plain), 2)
            fanin = [await _chord(conn, jq, store, size) for _ in range(rounds)]
            fanout = [await _fanout(conn, jq, store, size) for _ in range(rounds)]
            result[f"chord_{size}_us_per_completion"] = round(statistics.median(fanin), 2)
            result[f"fanout_{size}_us_per_child"] = round(statistics.median(fanout), 2)
    await conn.close()
    return result


async def _empty(conn: asyncpg.Connection) -> None:
    await conn.execute(
        f'TRUNCATE "{SCHEMA}".jobs, "{SCHEMA}".workflows, "{SCHEMA}".workflow_edges '
        "RESTART IDENTITY CASCADE"
    )
    await conn.execute("ANALYZE")
    await conn.execute("CHECKPOINT")


async def _complete_timed(store: Store) -> float:
    """Claim SAMPLE due jobs, complete them BATCH at a time; microseconds per completion."""
    claimed = await store.claim(queue="default", limit=SAMPLE, worker_id=WORKER, lease_seconds=600)
    spent = 0.0
    for start in range(0, len(claimed), BATCH):
        batch = claimed[start : start + BATCH]
        began = time.perf_counter()
        await store.complete(jobs=batch, worker_id=WORKER, status=JobStatus.COMPLETED)
        spent += time.perf_counter() - began
    return spent / len(claimed) * 1e6


async def _plain(conn: asyncpg.Connection, jq: JobQueue, store: Store, size: int) -> float:
    """As many jobs outside workflows, the same 1,000 completions: the baseline."""
    await _empty(conn)
    for start in range(0, size, 10_000):
        await jq.enqueue_many("bench", [{}] * min(10_000, size - start))
    await conn.execute("ANALYZE")
    return await _complete_timed(store)


async def _chord(conn: asyncpg.Connection, jq: JobQueue, store: Store, size: int) -> float:
    await _empty(conn)
    wf = jq.workflow("chord")
    wf.chord([step("bench") for _ in range(size - 1)], step("bench", ref="callback"))
    await wf.enqueue()
    await conn.execute("ANALYZE")
    return await _complete_timed(store)


async def _fanout(conn: asyncpg.Connection, jq: JobQueue, store: Store, size: int) -> float:
    await _empty(conn)
    wf = jq.workflow("fanout")
    parent = wf.add("bench", ref="parent")
    wf.group(*(step("bench") for _ in range(size - 1)), depends_on=[parent])
    await wf.enqueue()
    await conn.execute("ANALYZE")
    [claimed] = await store.claim(queue="default", limit=1, worker_id=WORKER, lease_seconds=600)
    began = time.perf_counter()
    await store.complete(jobs=[claimed], worker_id=WORKER, status=JobStatus.COMPLETED)
    return (time.perf_counter() - began) / (size - 1) * 1e6


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="workflow_release")
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    return asyncio.run(release(args.dsn, sizes, args.rounds))
