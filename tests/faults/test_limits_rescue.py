"""A worker killed while it holds jobs of a queue with a global limit: its jobs keep
their slots until they are rescued, and the limit holds throughout."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import asyncpg
import pytest

from tests.acceptance.test_limits import (
    fill,
    most_overlapping,
    set_limits,
    start_workers,
    wait_spans,
)
from tests.conftest import Spawn

JOBS = 120


async def holder(dsn: str, schema: str) -> tuple[int, int] | None:
    """The pid of a worker running jobs of the limited queue, and how many."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            f"""SELECT w.pid, count(*) AS n FROM "{schema}".jobs AS j
                JOIN "{schema}".workers AS w ON w.id = j.worker_id
                WHERE j.status = 'running' AND j.queue = 'limited'
                GROUP BY w.pid ORDER BY n DESC LIMIT 1"""
        )
        return None if row is None else (row["pid"], row["n"])
    finally:
        await conn.close()


async def rescues(dsn: str, schema: str) -> dict[tuple[int, int], object]:
    """When each lost attempt was rescued, by (job id, attempt)."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            f"""SELECT job_id, attempt, finished_at FROM "{schema}".job_attempts
                WHERE error = 'worker lost (lease expired)'"""
        )
        return {(r["job_id"], r["attempt"]): r["finished_at"] for r in rows}
    finally:
        await conn.close()


@pytest.mark.slow
def test_kill_9_of_a_worker_holding_limited_jobs(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    env.update(JOBQUEUE_LEASE_SECONDS="2", JOBQUEUE_RESCUE_INTERVAL="0.5", RETRY_DELAY_SECONDS="0")
    asyncio.run(set_limits(pg_dsn, schema, "limited", global_limit=3))
    workers = start_workers(spawn, env)
    asyncio.run(fill(pg_dsn, schema, "limited", [{"ms": 150} for _ in range(JOBS)]))
    deadline = time.monotonic() + 30
    while (held := asyncio.run(holder(pg_dsn, schema))) is None or held[1] < 2:
        assert time.monotonic() < deadline, "no worker held two limited jobs"
        time.sleep(0.02)
    victim = next(w for w in workers if w.popen.pid == held[0])
    os.kill(victim.popen.pid, signal.SIGKILL)
    victim.popen.wait()

    rows = wait_spans(pg_dsn, schema, JOBS)
    for w in workers:
        if w is not victim:
            assert w.stop() == 0, w.output
    rescued = asyncio.run(rescues(pg_dsn, schema))
    assert len(rescued) >= 2  # the victim's jobs, lost and rescued
    # A lost attempt held its slot until it was rescued: its span ends there.
    ledger = [
        {**dict(r), "ended": r["ended"] or rescued[(r["job_id"], r["attempt"])]} for r in rows
    ]
    assert most_overlapping(ledger) == 3
    # After the rescue the queue gets its 3 slots back.
    after = [r for r in ledger if r["started"] > max(rescued.values())]  # type: ignore[type-var]
    assert most_overlapping(after) == 3
    assert len({r["job_id"] for r in rows if r["ended"] is not None}) == JOBS
