"""With live workers in separate processes, every job runs exactly once."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from tests.apps.ledger_app import create_ledger
from tests.conftest import Spawn

JOBS = 5000
PROCESSES = 4
SLOTS = 10


@pytest.mark.slow
def test_5000_jobs_across_4_worker_processes_each_run_exactly_once(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    async def fill() -> None:
        conn = await asyncpg.connect(pg_dsn)
        try:
            await create_ledger(conn, schema)
            await conn.execute(
                f"""INSERT INTO "{schema}".jobs (type, payload)
                    SELECT 'record', jsonb_build_object('n', n) FROM generate_series(1, $1) n""",
                JOBS,
            )
        finally:
            await conn.close()

    async def finished() -> tuple[int, int]:
        conn = await asyncpg.connect(pg_dsn)
        try:
            row = await conn.fetchrow(
                f"""SELECT count(*) FILTER (WHERE status = 'completed') AS done,
                           count(*) FILTER (WHERE status <> 'completed') AS other
                    FROM "{schema}".jobs"""
            )
            return row["done"], row["other"]
        finally:
            await conn.close()

    env["JOBQUEUE_LOG_LEVEL"] = "info"
    workers = [
        spawn(["worker", "--app", "ledger_app:jq", "--worker-count", str(SLOTS)], env)
        for _ in range(PROCESSES)
    ]
    for w in workers:  # all compete from the first job on
        w.wait_for_output("worker started")
    asyncio.run(fill())
    deadline = time.monotonic() + 180
    while (progress := asyncio.run(finished()))[0] < JOBS:
        assert time.monotonic() < deadline, f"only {progress[0]} of {JOBS} completed"
        assert all(w.popen.poll() is None for w in workers), [w.output for w in workers]
        time.sleep(0.5)
    assert all(w.stop() == 0 for w in workers)

    async def ledger() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(pg_dsn)
        try:
            return await conn.fetch(
                f"""SELECT j.id, count(l.job_id) AS runs, min(l.attempt) AS attempt,
                           min(l.pid) AS pid, min(j.status) AS status
                    FROM "{schema}".jobs j LEFT JOIN "{schema}".ledger l ON l.job_id = j.id
                    GROUP BY j.id"""
            )
        finally:
            await conn.close()

    rows = asyncio.run(ledger())
    assert len(rows) == JOBS
    assert {r["status"] for r in rows} == {"completed"}
    assert [r["id"] for r in rows if r["runs"] != 1] == []
    assert {r["attempt"] for r in rows} == {1}
    assert {r["pid"] for r in rows} == {w.popen.pid for w in workers}
