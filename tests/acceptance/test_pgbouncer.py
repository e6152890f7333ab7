"""jobqueue behind PgBouncer in transaction pooling mode (Debian's `pgbouncer`, started
here): the API, enqueue, and the worker's claims, completions, heartbeats and
maintenance all go through it, while migrations and LISTEN take the direct session of
JOBQUEUE_DIRECT_DATABASE_URL."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import asyncpg
import httpx
import pytest

from jobqueue.db.sql import migrations
from tests.conftest import Spawn, free_ports, jobqueue

pytestmark = pytest.mark.anyio

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


@pytest.fixture
def pgbouncer(pg_dsn: str, tmp_path: Path, env: dict[str, str]) -> Iterator[str]:
    """A PgBouncer in transaction mode in front of the test database; its DSN."""
    if not Path(PGBOUNCER).exists():
        pytest.fail("pgbouncer is not installed: apt-get install pgbouncer (scripts/test does)")
    target = urlsplit(pg_dsn)
    host = unquote(target.hostname or "") or "127.0.0.1"
    user = unquote(target.username or "postgres")
    dbname = target.path.lstrip("/") or "postgres"
    port = free_ports(1, besides=int(env["PORT"]))[0]  # the test's server takes PORT
    config = tmp_path / "pgbouncer.ini"
    config.write_text(
        "[databases]\n"
        f"* = host={host} port={target.port or 5432} user={user}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\n"
        "auth_type = any\npool_mode = transaction\n"
        "default_pool_size = 10\nmax_client_conn = 1000\n"
        "unix_socket_dir =\n"
        # asyncpg sends it; PgBouncer does not track it.
        "ignore_startup_parameters = extra_float_digits\n"
    )
    config.chmod(0o644)
    tmp_path.chmod(0o755)  # PgBouncer, run as postgres under root, must read it
    as_root = ["-u", "postgres"] if os.geteuid() == 0 else []
    log = (tmp_path / "pgbouncer.log").open("wb")
    process = subprocess.Popen(
        [PGBOUNCER, *as_root, str(config)], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            assert process.poll() is None, (tmp_path / "pgbouncer.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "pgbouncer did not listen within 10 s"
                time.sleep(0.05)
        yield f"postgresql://{user}@127.0.0.1:{port}/{dbname}"
    finally:
        process.terminate()
        process.wait(10)
        log.close()


def test_pgbouncer_without_a_direct_session_is_one_line_and_exit_1(
    env: dict[str, str], pgbouncer: str
) -> None:
    for command in (["serve"], ["jobs", "list"]):
        done = jobqueue(dict(env, DATABASE_URL=pgbouncer), *command)
        assert done.returncode == 1, done
        assert done.stderr.strip().splitlines() == [
            "jobqueue: error: the database refused a session setting (unsupported startup "
            "parameter: statement_timeout): DATABASE_URL looks like PgBouncer; set "
            "JOBQUEUE_DIRECT_DATABASE_URL to the database itself (docs/scaling.md)"
        ], done.stderr


async def test_serve_through_pgbouncer_in_transaction_mode(
    spawn: Spawn, env: dict[str, str], pg_dsn: str, pgbouncer: str, db: asyncpg.Connection,
    schema: str,
) -> None:  # fmt: skip
    env.update(
        DATABASE_URL=pgbouncer,
        JOBQUEUE_DIRECT_DATABASE_URL=pg_dsn,
        JOBQUEUE_APP="jobqueue.demo:jq",
        # Heartbeats every second, during the sleeping jobs.
        JOBQUEUE_LEASE_SECONDS="3",
        JOBQUEUE_RESCUE_INTERVAL="1",
        WORKER_COUNT="20",
    )
    server = spawn(["serve"], env)
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        sleeping = [
            (await client.post("/jobs", json={"type": "sleep", "payload": {"seconds": 2}})).json()
            for _ in range(5)
        ]
        batch = await client.post("/jobs/batch", json={"jobs": [{"type": "noop"}] * 300})
        assert batch.status_code == 201, batch.text
        singles = [
            (await client.post("/jobs", json={"type": "noop"})).status_code for _ in range(50)
        ]
        assert set(singles) == {201}
        for job in sleeping:
            done = await client.get(f"/jobs/{job['id']}", params={"wait": 30})
            assert done.json()["status"] == "completed", done.text
        deadline = time.monotonic() + 30
        while (await client.get("/queues")).json()["queues"][0]["completed"] < 355:
            assert time.monotonic() < deadline, (await client.get("/queues")).text
            await asyncio.sleep(0.1)

    counts = dict(await db.fetch(f'SELECT status, count(*) FROM "{schema}".jobs GROUP BY status'))
    assert counts == {"completed": 355}
    # A test server may run with autovacuum off, which the leader rightly warns of
    # (docs/retention.md#vacuum): that warning alone is not a problem here.
    lines = server.output.splitlines()
    output = "\n".join(line for line in lines if "autovacuum is off" not in line)
    for problem in ("prepared statement", "Traceback", "[error", "[warning"):
        assert problem not in output, output


async def test_poll_only_runs_everything_through_pgbouncer_alone(
    spawn: Spawn, env: dict[str, str], pgbouncer: str, db: asyncpg.Connection, schema: str
) -> None:
    """JOBQUEUE_DIRECT_DATABASE_URL=none: no session anywhere. Start-up migrates through
    PgBouncer, workers (one process, and a supervisor's two) find jobs by polling, a
    running job's cancellation arrives with a heartbeat, and no backend LISTENs."""
    await db.execute(f'DROP SCHEMA "{schema}" CASCADE')  # start-up migrates it again
    env.update(
        DATABASE_URL=pgbouncer,
        JOBQUEUE_DIRECT_DATABASE_URL="none",
        JOBQUEUE_APP="jobqueue.demo:jq",
        JOBQUEUE_LEASE_SECONDS="3",
        JOBQUEUE_RESCUE_INTERVAL="1",
    )
    server = spawn(["serve"], env)
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base, timeout=30)
    workers = spawn(["worker", "--processes", "2", "--no-migrate"], env)
    async with httpx.AsyncClient(base_url=base, timeout=40) as client:
        ready = (await client.get("/readyz")).json()
        assert ready["listener"] == "off; polling", ready
        sleeper = await client.post("/jobs", json={"type": "sleep", "payload": {"seconds": 60}})
        job_id = sleeper.json()["id"]
        deadline = time.monotonic() + 20
        while (await client.get(f"/jobs/{job_id}")).json()["status"] != "running":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        assert (await client.post(f"/jobs/{job_id}/cancel")).status_code == 202  # asked
        cancelled = await client.get(f"/jobs/{job_id}", params={"wait": 30})
        assert cancelled.json()["status"] == "cancelled", cancelled.text

        batch = await client.post("/jobs/batch", json={"jobs": [{"type": "noop"}] * 300})
        assert batch.status_code == 201, batch.text
        last = batch.json()["ids"][-1]
        done = await client.get(f"/jobs/{last}", params={"wait": 30})
        assert done.json()["status"] == "completed", done.text
        deadline = time.monotonic() + 30
        while (await client.get("/queues")).json()["queues"][0]["completed"] < 300:
            assert time.monotonic() < deadline, (await client.get("/queues")).text
            await asyncio.sleep(0.1)

    registered = await db.fetchval(f'SELECT count(*) FROM "{schema}".workers')
    assert registered == 3  # serve's worker and the supervisor's two processes
    listening = await db.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND query ILIKE 'LISTEN%'"
    )
    assert listening == 0
    applied = await db.fetchval(f'SELECT count(*) FROM "{schema}".jobqueue_migrations')
    assert applied == len(migrations(schema))
    workers.stop()
    for output in (server.output, workers.output):
        for problem in ("prepared statement", "Traceback", "[error"):
            assert problem not in output, output
