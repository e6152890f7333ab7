"""Limits shared by every worker (docs/limits.md): what they cost, measured with real
`jobqueue worker` processes on the demo app's `noop` jobs (`jobqueue bench --only limits`).

- ``drain_1proc_limits_elsewhere_ratio``: one worker process drains an unlimited queue
  while the other queues it serves have limits (a global limit, a rate, a key limit),
  against the same drain with no limit defined anywhere; the two alternate in each
  round, and the figure is the median of the rounds' ratios.
- ``drain_limited``: a queue with ``global_limit=100`` drained by two processes.
- ``drain_keyed``: 1,000 keys with ``key_limit=1`` each, drained by one process.
- ``claim_us_unlimited`` / ``claim_us_limited`` / ``claim_us_keyed``: the time of one
  claim of 10 jobs, in this process, on a queue without limits (claim.sql), with a
  global limit (limit_lock.sql then claim_limited.sql, in a transaction) and with a
  key limit over 1,000 keys.

With JQBENCH_BASELINE_SRC naming another checkout's ``src`` (the code before limits),
``drain_1proc_before_ratio`` is the unlimited drain of this code against that one's,
alternated in each round the same way.

A drain's rate is its jobs over the time from its first start to its last end, both
by the database's clock, so that the workers' start-up is not counted. Nothing here
asserts a time.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import asyncpg

from jobqueue import logs
from jobqueue.control import set_limits
from jobqueue.db.migrate import migrate
from jobqueue.db.store import Store
from jobqueue.worker import limited_claim

SCHEMA = "jobqueue"
QUEUES = "default,mail,api,tenants"
ELSEWHERE = {  # limits on the queues the drained one shares its worker with
    "mail": {"global_limit": 5},
    "api": {"rate_limit": "100/m"},
    "tenants": {"key_limit": 2},
}


logs.configure("warning")  # migrate()'s lines would mix with the figures on stdout


def progress(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def limits_figures(dsn: str, runs: int, scale: float) -> dict[str, Any]:
    """Every figure above, medians of ``runs`` rounds."""
    n = max(1000, int(50_000 * scale))
    baseline = os.environ.get("JQBENCH_BASELINE_SRC")
    before: list[float] = []
    none: list[float] = []
    elsewhere: list[float] = []
    limited: list[float] = []
    keyed: list[float] = []
    for i in range(runs):
        progress(f"jobqueue: limits run {i + 1}/{runs}")
        if baseline:
            before.append(asyncio.run(drain(dsn, n, processes=1, src=baseline)))
        none.append(asyncio.run(drain(dsn, n, processes=1)))
        elsewhere.append(asyncio.run(drain(dsn, n, processes=1, limits=ELSEWHERE)))
        limited.append(
            asyncio.run(drain(dsn, n // 2, processes=2, limits={"default": {"global_limit": 100}}))
        )
        keyed.append(
            asyncio.run(drain(dsn, n // 2, processes=1, limits={"default": {"key_limit": 1}},
                              keys=1000))
        )  # fmt: skip
    costs = [asyncio.run(claim_costs(dsn, max(2000, int(20_000 * scale)))) for _ in range(runs)]
    ratios = [e / b for e, b in zip(elsewhere, none, strict=True)]
    if baseline:
        compared = [a / b for a, b in zip(none, before, strict=True)]
        progress(f"before: {before}, after: {none}")
        figures = {
            "drain_1proc_before": round(statistics.median(before), 2),
            "drain_1proc_before_ratio": round(statistics.median(compared), 3),
        }
    else:
        figures = {}
    return figures | {
        "drain_1proc_no_limits": round(statistics.median(none), 2),
        "drain_1proc_limits_elsewhere": round(statistics.median(elsewhere), 2),
        "drain_1proc_limits_elsewhere_ratio": round(statistics.median(ratios), 3),
        "drain_limited": round(statistics.median(limited), 2),
        "drain_keyed": round(statistics.median(keyed), 2),
        **{
            key: round(statistics.median(c[key] for c in costs), 1)
            for key in ("claim_us_unlimited", "claim_us_limited", "claim_us_keyed")
        },
    }


async def fresh(dsn: str, conn: asyncpg.Connection, limits: dict[str, dict[str, Any]]) -> None:
    """An empty schema with ``limits`` set."""
    await conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
    await migrate(conn, SCHEMA)
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    try:
        for queue, given in limits.items():
            await set_limits(Store(pool, SCHEMA), queue, given)
    finally:
        await pool.close()


async def drain(
    dsn: str,
    n: int,
    *,
    processes: int,
    limits: dict[str, dict[str, Any]] | None = None,
    keys: int | None = None,
    src: str | None = None,
) -> float:
    """Jobs per second of ``processes`` workers draining ``n`` noop jobs of default."""
    conn = await asyncpg.connect(dsn)
    try:
        await fresh(dsn, conn, limits or {})
        await conn.execute(
            f"""INSERT INTO "{SCHEMA}".jobs (type, queue, concurrency_key)
                SELECT 'noop', 'default', CASE WHEN $2::int IS NOT NULL
                                               THEN 'tenant-' || (g % $2) END
                FROM generate_series(1, $1) AS g""",
            n,
            keys,
        )
        await conn.execute(f'ANALYZE "{SCHEMA}".jobs')
        with workers(dsn, processes, src):
            deadline = time.monotonic() + 600
            unfinished = f"""SELECT count(*) FROM "{SCHEMA}".jobs
                             WHERE status IN ('pending', 'running')"""
            while await conn.fetchval(unfinished):
                if time.monotonic() > deadline:
                    raise SystemExit("jobqueue bench: limits: the drain did not finish")
                await asyncio.sleep(0.05)
        seconds = await conn.fetchval(
            f"""SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8
                FROM "{SCHEMA}".jobs"""
        )
        return float(n / seconds)
    finally:
        await conn.close()


@contextmanager
def workers(dsn: str, processes: int, src: str | None = None) -> Iterator[None]:
    """``processes`` workers of this code (or of the checkout ``src``)."""
    path = {"PYTHONPATH": src} if src else {}
    env = {**os.environ, **path, "DATABASE_URL": dsn, "JOBQUEUE_LOG_LEVEL": "warning",
           "JOBQUEUE_APP": "jobqueue.demo:jq", "JOBQUEUE_QUEUES": QUEUES,
           "WORKER_COUNT": "1000", "JOBQUEUE_METRICS": "off"}  # fmt: skip
    started = [
        subprocess.Popen([sys.executable, "-m", "jobqueue", "worker", "--no-migrate"], env=env)
        for _ in range(processes)
    ]
    try:
        yield
    finally:
        for worker in started:
            worker.terminate()
        for worker in started:
            worker.wait(60)


async def claim_costs(dsn: str, n: int) -> dict[str, float]:
    """Microseconds per claim of 10 jobs: unlimited, with a global limit, keyed."""
    conn = await asyncpg.connect(dsn)
    try:
        await fresh(dsn, conn, {"limited": {"global_limit": 1_000_000}, "keyed": {"key_limit": 1}})
        for queue in ("unlimited", "limited", "keyed"):
            await conn.execute(
                f"""INSERT INTO "{SCHEMA}".jobs (type, queue, concurrency_key)
                    SELECT 'noop', $2, CASE WHEN $2 = 'keyed' THEN 'tenant-' || (g % 1000) END
                    FROM generate_series(1, $1) AS g""",
                n,
                queue,
            )
        await conn.execute(f'ANALYZE "{SCHEMA}".jobs')
        store = Store(conn, SCHEMA)
        out = {}
        for queue in ("unlimited", "limited", "keyed"):
            took = []
            for _ in range(200):
                started = time.perf_counter()
                if queue == "unlimited":
                    got = await store.claim(queue=queue, limit=10, worker_id="w", lease_seconds=60)
                else:
                    got = await limited_claim.claim(
                        store, queue=queue, limit=10, worker_id="w", lease_seconds=60
                    )
                took.append(time.perf_counter() - started)
                assert len(got) == 10, (queue, len(got))
                # Free the keys again, so that every claim finds 10 keys with room.
                await conn.execute(
                    f"""UPDATE "{SCHEMA}".jobs SET status = 'completed', worker_id = NULL
                        WHERE id = ANY($1::bigint[])""",
                    [j.id for j in got],
                )
            out[f"claim_us_{queue}"] = statistics.median(took) * 1e6
        return out
    finally:
        await conn.close()
