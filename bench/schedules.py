"""Schedules' tick lateness (docs/schedules.md#figures): how late the leader enqueues a
tick with 1,000 schedules defined.

    python bench/schedules.py [--schedules 1000] [--seconds 30] [--json]

On DATABASE_URL, or the embedded server. A `jobqueue worker` process on a fresh
schema leads maintenance and enqueues the ticks; its jobs are of a type it has no
task for, so it only enqueues them. A tick's lateness is its job's `created_at` less
its `run_at` (the tick), both the database's clock. Two workloads:

- ``interval``: the schedules every 10 s, their phases spread over the time it took
  to make them, for ``--seconds``;
- ``cron_burst``: the same number of `* * * * *` schedules, all due at the same
  minute's start: the leader's worst case, every tick due at once (handled 100 a
  transaction).

Nothing here asserts a time: it prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

import asyncpg

sys.path.insert(0, os.path.dirname(__file__))
from run import database_url

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.db.migrate import migrate

SCHEMA = "jqbench_schedules"


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench/schedules.py", description=__doc__.split("\n")[0])
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    dsn, server = database_url()
    try:
        figures = asyncio.run(measure(dsn, args.schedules, args.seconds))
    finally:
        if server is not None:
            server.stop()
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:<34} {value}")
    return 0


async def measure(dsn: str, count: int, seconds: float) -> dict[str, Any]:
    figures: dict[str, Any] = {"schedules": count}
    for workload in ("interval", "cron_burst"):
        await fresh(dsn)
        jq = JobQueue(settings=Settings(database_url=dsn, schema=SCHEMA, migrate=False))
        async with jq:
            for i in range(count):
                if workload == "interval":
                    await jq.schedules.create(f"s{i}", "bench_tick", every="10s")
                else:
                    await jq.schedules.create(f"s{i}", "bench_tick", cron="* * * * *")
        made = time.monotonic()
        with worker(dsn):
            if workload == "interval":
                await asyncio.sleep(seconds)
            else:  # until the first minute's ticks are all in, a little after it starts
                wait = 60 - datetime.now(UTC).second + 5
                await asyncio.sleep(max(wait, 15 - (time.monotonic() - made)))
        late = await lateness(dsn)
        figures[f"{workload}_ticks"] = len(late)
        for q in (50, 99):
            figures[f"{workload}_lateness_p{q}_ms"] = round(percentile(late, q), 2)
        figures[f"{workload}_lateness_max_ms"] = round(max(late, default=0.0), 2)
    return figures


async def fresh(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
        await migrate(conn, SCHEMA)
    finally:
        await conn.close()


class worker:
    """A `jobqueue worker` that leads maintenance, for the block's length."""

    def __init__(self, dsn: str) -> None:
        self._env = {**os.environ, "DATABASE_URL": dsn, "JOBQUEUE_SCHEMA": SCHEMA,
                     "JOBQUEUE_LOG_LEVEL": "warning", "JOBQUEUE_MIGRATE": "false"}  # fmt: skip

    def __enter__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "jobqueue", "worker"], env=self._env
        )

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.wait(30)


async def lateness(dsn: str) -> list[float]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            f"SELECT EXTRACT(EPOCH FROM created_at - run_at) * 1000 AS ms "
            f'FROM "{SCHEMA}".jobs ORDER BY ms'
        )
    finally:
        await conn.close()
    return [float(r["ms"]) for r in rows]


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, round(q / 100 * (len(sorted_values) - 1)))
    return sorted_values[index]


if __name__ == "__main__":
    sys.exit(main())
