"""The cost of a durable step (docs/durable.md#figures): microseconds per `ctx.step`
against the plain call of the same function, and per step replayed; and the time from
a parent's last child ending to the parent's resumption.

    python bench/durable.py [--steps 2000] [--rounds 5] [--parents 200] [--json]

On DATABASE_URL, or the embedded server. One job is claimed as a worker claims it; its
run then calls an async no-op function ``--steps`` times through ``ctx.step``, each
step a name of its own (one fenced INSERT, one round trip, one commit each), and
``--steps`` times directly. A second run of the same job replays them: one read of
the recorded steps, then each call returns its recorded result. Medians of
``--rounds`` rounds, each on a fresh job.

Resumption: a worker in this process (4 slots) runs ``--parents`` parents, one after
another, each spawning 3 children and waiting for them (``ctx.wait_for``). Per parent,
the time from its last child's end (its ``finished_at``, the completion's transaction)
to the start of the parent's resumed run (its ``started_at``, the claim's), both on
the database's clock: the release in the child's transaction, the NOTIFY, the claim.
p50 and p99 over the parents.

Nothing here asserts a time: it prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from typing import Any

import asyncpg

sys.path.insert(0, os.path.dirname(__file__))
from run import database_url

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.context import JobContext
from jobqueue.db.migrate import migrate
from jobqueue.durable import Durable

SCHEMA = "jqbench_durable"


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench/durable.py", description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--parents", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    dsn, server = database_url()
    try:
        figures = asyncio.run(measure(dsn, args.steps, args.rounds))
        figures.update(asyncio.run(resumption(dsn, args.parents)))
    finally:
        if server is not None:
            server.stop()
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:<28} {value}")
    return 0


async def noop(i: int) -> int:
    return i


async def measure(dsn: str, steps: int, rounds: int) -> dict[str, Any]:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
        await migrate(conn, SCHEMA)
    finally:
        await conn.close()
    async with JobQueue(settings=Settings(database_url=dsn, schema=SCHEMA, migrate=False)) as jq:
        store = await jq.store()
        durable = Durable(store, "bench", 65536)
        plain, step, replay = [], [], []
        for _ in range(rounds):
            await jq.enqueue("bench_durable")
            [job] = await store.claim(
                queue="default", limit=1, worker_id="bench", lease_seconds=300
            )
            started = time.perf_counter()
            for i in range(steps):
                await noop(i)
            plain.append((time.perf_counter() - started) / steps)
            run = durable.run(job)
            started = time.perf_counter()
            for i in range(steps):
                await run.step(f"s{i}", noop, (i,), {})
            step.append((time.perf_counter() - started) / steps)
            again = durable.run(job)
            started = time.perf_counter()
            for i in range(steps):
                await again.step(f"s{i}", noop, (i,), {})
            replay.append((time.perf_counter() - started) / steps)
        return {
            "steps_per_round": steps,
            "rounds": rounds,
            "plain_call_us": round(statistics.median(plain) * 1e6, 3),
            "step_us": round(statistics.median(step) * 1e6, 1),
            "step_replayed_us": round(statistics.median(replay) * 1e6, 2),
        }


async def resumption(dsn: str, parents: int) -> dict[str, Any]:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
        await migrate(conn, SCHEMA)
    finally:
        await conn.close()
    settings = Settings(database_url=dsn, schema=SCHEMA, migrate=False, worker_count=4)
    async with JobQueue(settings=settings) as jq:

        @jq.task("bench_child")
        async def bench_child(payload: dict[str, Any]) -> int:
            return int(payload["n"])

        @jq.task("bench_parent")
        async def bench_parent(payload: dict[str, Any], ctx: JobContext) -> int:
            return sum(
                await ctx.wait_for(await ctx.spawn([("bench_child", {"n": n}) for n in range(3)]))
            )

        gaps = []
        async with jq.worker():
            for _ in range(parents):
                job = await jq.enqueue("bench_parent")
                await jq.wait(job.id, timeout=30)
            store = await jq.store()
            for r in await store.db.fetch(_GAPS_SQL.format(schema=SCHEMA)):
                gaps.append(r["gap"])
        gaps.sort()
        return {
            "resumption_parents": len(gaps),
            "resumption_p50_ms": round(statistics.median(gaps) * 1000, 2),
            "resumption_p99_ms": round(gaps[int(len(gaps) * 0.99) - 1] * 1000, 2),
        }


# Per parent: its resumed run's start after its last child's end, in seconds. Read
# here, not through a store query: a figure of the bench, not of the product.
_GAPS_SQL = """
SELECT EXTRACT(EPOCH FROM p.started_at - max(c.finished_at))::float8 AS gap
FROM "{schema}".jobs AS p JOIN "{schema}".jobs AS c ON c.spawned_by = p.id
WHERE p.type = 'bench_parent' AND p.status = 'completed'
GROUP BY p.id, p.started_at
"""


if __name__ == "__main__":
    sys.exit(main())
