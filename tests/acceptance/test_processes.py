"""`jobqueue worker --processes N`: N worker processes under one supervisor."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time

import asyncpg
import pytest

from jobqueue import JobQueue
from tests.apps.ledger_app import create_ledger
from tests.conftest import Process, Spawn, client_ports


async def fill(dsn: str, schema: str, jobs: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await create_ledger(conn, schema)
        await conn.execute(
            f"""INSERT INTO "{schema}".jobs (type) SELECT 'record' FROM generate_series(1, $1)""",
            jobs,
        )
    finally:
        await conn.close()


async def ledger(dsn: str, schema: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(f'SELECT job_id, pid FROM "{schema}".ledger')
    finally:
        await conn.close()


def worker_pids(supervisor: Process) -> list[int]:
    found = re.findall(r"pids=([\d,]+)", supervisor.output)
    assert found, supervisor.output
    return [int(p) for p in found[-1].split(",")]


def started_workers(supervisor: Process, processes: int) -> list[int]:
    """The pids of the supervisor's workers, once each has started."""
    pids = worker_pids(supervisor)
    deadline = time.monotonic() + 30
    while supervisor.output.count("worker started") < processes:
        assert time.monotonic() < deadline, supervisor.output
        time.sleep(0.05)
    return pids


def wait_ledger(dsn: str, schema: str, jobs: int) -> list[asyncpg.Record]:
    deadline = time.monotonic() + 60
    while len(rows := asyncio.run(ledger(dsn, schema))) < jobs:
        assert time.monotonic() < deadline, f"{len(rows)} of {jobs} jobs ran"
        time.sleep(0.2)
    return rows


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_processes_share_the_work_and_stop_together(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    supervisor = spawn(["worker", "--processes", "2", "--app", "ledger_app:jq"], env)
    supervisor.wait_for_output("Started 2 worker processes")
    pids = started_workers(supervisor, 2)

    asyncio.run(fill(pg_dsn, schema, 2000))
    rows = wait_ledger(pg_dsn, schema, 2000)
    assert len({r["job_id"] for r in rows}) == 2000
    assert {r["pid"] for r in rows} == set(pids)

    supervisor.popen.send_signal(signal.SIGTERM)
    assert supervisor.popen.wait(30) == 0, supervisor.output
    assert not any(alive(pid) for pid in pids)


def test_a_worker_that_dies_is_replaced(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    supervisor = spawn(["worker", "--processes", "2", "--app", "ledger_app:jq"], env)
    supervisor.wait_for_output("Started 2 worker processes")
    first, second = worker_pids(supervisor)
    deadline = time.monotonic() + 30
    while supervisor.output.count("worker started") < 2:
        assert time.monotonic() < deadline, supervisor.output
        time.sleep(0.05)
    os.kill(first, signal.SIGKILL)
    supervisor.wait_for_output(f"Worker process {first} exited with code -9")
    deadline = time.monotonic() + 30
    while supervisor.output.count("worker started") < 3:
        assert time.monotonic() < deadline, supervisor.output
        time.sleep(0.05)

    replacement = int(re.findall(r"Started worker process (\d+)", supervisor.output)[0])
    assert alive(replacement)

    asyncio.run(fill(pg_dsn, schema, 500))
    rows = wait_ledger(pg_dsn, schema, 500)
    assert {r["pid"] for r in rows} <= {second, replacement}
    supervisor.popen.send_signal(signal.SIGTERM)
    assert supervisor.popen.wait(30) == 0, supervisor.output


def test_processes_must_be_positive(env: dict[str, str], spawn: Spawn) -> None:
    proc = spawn(["worker", "--processes", "0"], env)
    assert proc.popen.wait(30) == 2
    assert "--processes must be a positive integer, got '0'" in proc.output


def test_a_stop_while_the_workers_are_still_starting_is_clean(
    env: dict[str, str], spawn: Spawn
) -> None:
    supervisor = spawn(["worker", "--processes", "2"], env)
    supervisor.wait_for_output("Started 2 worker processes")
    supervisor.popen.send_signal(signal.SIGTERM)  # before they install their handlers
    assert supervisor.popen.wait(30) == 0, supervisor.output
    assert "exit_codes=" in supervisor.output


async def server_connections(dsn: str, pid: int) -> list[str]:
    """The application names of the server connections process ``pid`` holds."""
    ports = client_ports([pid])
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT application_name FROM pg_stat_activity WHERE client_port = ANY($1::int[])",
            sorted(ports),
        )
        return sorted(r["application_name"] for r in rows)
    finally:
        await conn.close()


def test_one_listen_connection_wakes_every_process(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    """The supervisor listens and relays: its children hold no LISTEN connection, and
    still start a job at once (their fallback poll is 30 s away) and stop one asked to.
    Each child holds one pooled connection, after a burst of jobs too: N + 1 for the
    host."""
    if not pg_dsn.startswith("postgresql://") or "@127.0.0.1" not in pg_dsn:
        pytest.fail("this test counts TCP connections: it needs a TCP DSN on 127.0.0.1")
    env.update(POLL_INTERVAL_SECONDS="30", JOBQUEUE_APP="jobqueue.demo:jq")
    supervisor = spawn(["worker", "--processes", "3"], env)
    supervisor.wait_for_output("Started 3 worker processes")
    pids = started_workers(supervisor, 3)

    async def go() -> None:
        async with JobQueue(pg_dsn, schema=schema) as jq:
            for _ in range(6):
                job = await jq.enqueue("noop", {})
                assert (await jq.wait(job.id, timeout=10)).status == "completed"
            long = await jq.enqueue("sleep", {"seconds": 60})
            deadline = time.monotonic() + 10
            while (await jq.get(long.id)).status != "running":  # type: ignore[union-attr]
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            await jq.cancel(long.id)
            assert (await jq.wait(long.id, timeout=10)).status == "cancelled"
            burst = await jq.enqueue_many("noop", [{}] * 3000)
            assert (await jq.wait(burst[-1], timeout=30)).status == "completed"

    asyncio.run(go())
    held = {pid: asyncio.run(server_connections(pg_dsn, pid)) for pid in pids}
    assert all(names == ["jobqueue"] for names in held.values()), held
    own = asyncio.run(server_connections(pg_dsn, supervisor.popen.pid))
    assert own == ["jobqueue-listener"], own
    supervisor.popen.send_signal(signal.SIGTERM)
    assert supervisor.popen.wait(30) == 0, supervisor.output
