"""Fault tests: real worker processes killed at random while jobs flow."""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from jobqueue.config import Settings
from tests.apps.ledger_app import create_ledger
from tests.conftest import Process, Spawn

LEASE = 2.0
INTERVAL = 0.5
JOBS = 3000
WORKERS = 4
KILLS = 15
# A job held by a dead worker is rescued within lease + a leader's term (3 intervals)
# + one interval; alive workers' jobs last at most 0.3 s. Slack for a loaded machine.
LONGEST_RUNNING = LEASE + 4 * INTERVAL + 0.3 + 3


@pytest.mark.slow
def test_kill_9_loop_loses_no_job_and_runs_no_attempt_twice(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    env.update(
        JOBQUEUE_APP="ledger_app:jq",
        # 16 jobs at once in all: the 3,000 jobs take long enough for 15 kills.
        WORKER_COUNT="4",
        JOBQUEUE_LEASE_SECONDS=str(LEASE),
        JOBQUEUE_RESCUE_INTERVAL=str(INTERVAL),
        RETRY_DELAY_SECONDS="0",
        MAX_ATTEMPTS="25",  # every job survives its worker being killed many times
    )
    rng = random.Random(7)

    async def fill() -> None:
        conn = await asyncpg.connect(pg_dsn)
        try:
            await create_ledger(conn, schema)
            await conn.executemany(
                f"""INSERT INTO "{schema}".jobs (type, payload, max_attempts)
                    VALUES ('record_slow', jsonb_build_object('ms', $1::int), 25)""",
                [(rng.randint(10, 300),) for _ in range(JOBS)],
            )
        finally:
            await conn.close()

    async def state() -> tuple[int, float]:
        conn = await asyncpg.connect(pg_dsn)
        try:
            row = await conn.fetchrow(
                f"""SELECT count(*) FILTER (WHERE status = 'completed') AS done,
                           coalesce(max(extract(epoch FROM now() - started_at))
                                    FILTER (WHERE status = 'running'), 0) AS longest
                    FROM "{schema}".jobs"""
            )
            return row["done"], float(row["longest"])
        finally:
            await conn.close()

    workers: list[Process] = []
    for i in range(WORKERS):
        workers.append(spawn(["worker"], env, name=f"worker{i}"))
    for w in workers:
        w.wait_for_output("worker started")
    asyncio.run(fill())

    longest = 0.0
    kills = 0
    deadline = time.monotonic() + 240
    next_kill = time.monotonic() + rng.uniform(1, 2)
    while True:
        done, running_for = asyncio.run(state())
        longest = max(longest, running_for)
        if done == JOBS:
            break
        assert time.monotonic() < deadline, f"only {done} of {JOBS} jobs completed"
        if kills < KILLS and time.monotonic() >= next_kill:
            i = rng.randrange(WORKERS)
            workers[i].popen.send_signal(signal.SIGKILL)
            workers[i].popen.wait()
            workers[i] = spawn(["worker"], env, name=f"worker{i}")
            kills += 1
            next_kill = time.monotonic() + rng.uniform(1, 2)
        time.sleep(0.2)
    for w in workers:
        assert w.stop() == 0, w.output

    async def ledger() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(pg_dsn)
        try:
            return await conn.fetch(
                f'SELECT job_id, attempt, count(*) AS n FROM "{schema}".ledger'
                " GROUP BY job_id, attempt"
            )
        finally:
            await conn.close()

    rows = asyncio.run(ledger())
    assert {r["job_id"] for r in rows} == set(range(1, JOBS + 1))  # every job ran
    assert [r for r in rows if r["n"] > 1] == []  # no (job, attempt) ran twice
    runs: dict[int, int] = {}
    for r in rows:
        runs[r["job_id"]] = runs.get(r["job_id"], 0) + 1
    rescued = {
        int(m)
        for w in spawned_logs(workers)
        for m in re.findall(r"error='worker lost \(lease expired\)' job_id=(\d+)", w)
    }
    again = {job for job, n in runs.items() if n > 1}
    assert again <= rescued, sorted(again - rescued)[:10]
    assert kills == KILLS
    assert longest < LONGEST_RUNNING, longest
    print(
        f"\nkill -9 loop: {JOBS} jobs, {kills} kills, {len(rescued)} rescues, "
        f"{len(again)} jobs run again, longest time running {longest:.2f}s"
    )


def spawned_logs(workers: list[Process]) -> list[str]:
    """Every worker log of this test, including those of the killed processes."""
    folder = workers[0].log_path.parent
    return [p.read_text(errors="replace") for p in folder.glob("worker*.log")]


def test_listener_loss_is_covered_by_polling_and_repaired(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    env.update(JOBQUEUE_APP="jobqueue.demo:jq", POLL_INTERVAL_SECONDS="1")
    worker = spawn(["worker"], env)
    worker.wait_for_output("worker started")

    async def kill_listener() -> int:
        conn = await asyncpg.connect(pg_dsn)
        try:
            # The only worker running: its LISTEN connection, whatever it last ran
            # (LISTEN on the jobs or cancel channel, or a ping).
            killed: int = await conn.fetchval(
                """SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                   WHERE application_name = 'jobqueue-listener'"""
            )
            return killed
        finally:
            await conn.close()

    deadline = time.monotonic() + 10
    while asyncio.run(kill_listener()) != 1:
        assert time.monotonic() < deadline, "no LISTEN connection found"
        time.sleep(0.05)
    lost_at = time.monotonic()
    worker.wait_for_output("listener connection lost; polling until it is back")

    from tests.conftest import enqueue, get

    settings = Settings(database_url=pg_dsn, schema=schema)
    job = enqueue(settings, "noop", {})
    deadline = time.monotonic() + 10
    while get(settings, job.id).status != "completed":
        assert time.monotonic() < deadline, worker.output
        time.sleep(0.05)
    worker.wait_for_output("listener reconnected; wake-ups by NOTIFY again", timeout=10)
    assert time.monotonic() - lost_at < 5 + 2  # back within 5 s, plus log-polling slack
    assert worker.stop() == 0


@pytest.mark.slow
def test_postgresql_restarts_under_load(tmp_path: Path, spawn: Spawn) -> None:
    """A server the test owns (never the shared one) restarts 5 times while jobs flow:
    no jobqueue process exits, the API answers 503 while it is down and 201 after, and
    every job completes."""
    from jobqueue.db.embedded import EmbeddedPostgres
    from tests.conftest import free_ports

    pg_port, port = free_ports(2, besides=0)
    server = EmbeddedPostgres(tmp_path / "pg", port=pg_port)
    dsn = server.start()
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "PORT": str(port),
        "JOBQUEUE_APP": "jobqueue.demo:jq",
        "WORKER_COUNT": "10",
        "POLL_INTERVAL_SECONDS": "0.5",
        "JOBQUEUE_LOG_LEVEL": "warning",
    }
    base = f"http://127.0.0.1:{port}"
    try:
        serve = spawn(["serve"], env, name="serve")
        serve.wait_http(base)
        worker = spawn(["worker"], env, name="worker")
        accepted: list[int] = []
        statuses: set[int] = set()
        with httpx.Client(base_url=base, timeout=5) as client:

            def post_some(count: int) -> None:
                for _ in range(count):
                    r = client.post("/jobs", json={"type": "sleep", "payload": {"seconds": 0.05}})
                    statuses.add(r.status_code)
                    if r.status_code == 201:
                        accepted.append(r.json()["id"])
                    else:
                        assert r.status_code == 503, r.text
                        assert r.json()["stored"] in (False, "unknown"), r.text

            for _ in range(5):
                post_some(20)
                noticed = outages_seen(worker)
                server.stop()
                post_some(5)  # while it is down
                deadline = time.monotonic() + 15
                while outages_seen(worker) == noticed:  # down until the worker sees it too
                    assert time.monotonic() < deadline, worker.output[-3000:]
                    time.sleep(0.05)
                server.start()
                deadline = time.monotonic() + 15
                while client.post("/jobs", json={"type": "noop"}).status_code != 201:
                    assert time.monotonic() < deadline, "API still failing after restart"
                    time.sleep(0.2)
            post_some(20)
            assert statuses == {201, 503}
            deadline = time.monotonic() + 60
            while True:
                states = {client.get(f"/jobs/{i}").json()["status"] for i in accepted}
                if states == {"completed"}:
                    break
                assert time.monotonic() < deadline, states
                time.sleep(0.5)
        assert serve.popen.poll() is None
        assert worker.popen.poll() is None
        assert serve.stop() == 0
        assert worker.stop() == 0
    finally:
        server.stop()


def outages_seen(proc: Process) -> int:
    """How many times the process has logged that the database is unavailable (while
    starting: "Database unavailable; retrying"; after: "database unavailable; ...")."""
    return proc.output.lower().count("database unavailable")


@pytest.mark.slow
def test_poison_jobs_end_failed_and_healthy_jobs_complete(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    env.update(
        JOBQUEUE_APP="poison_app:jq",
        JOBQUEUE_LEASE_SECONDS="1.5",
        JOBQUEUE_RESCUE_INTERVAL="0.3",
        RETRY_DELAY_SECONDS="0",
        WORKER_COUNT="10",
    )

    async def fill() -> None:
        conn = await asyncpg.connect(pg_dsn)
        try:
            await conn.execute(
                f"""INSERT INTO "{schema}".jobs (type, max_attempts)
                    SELECT t, 2 FROM unnest(ARRAY['hang', 'boom', 'spin']) t"""
            )
            await conn.execute(
                f"""INSERT INTO "{schema}".jobs (type, queue, max_attempts)
                    VALUES ('exit', 'lethal', 2)"""
            )
            await conn.execute(
                f"""INSERT INTO "{schema}".jobs (type) SELECT 'ok' FROM generate_series(1, 200)"""
            )
        finally:
            await conn.close()

    async def outcome() -> dict[str, tuple[str, int, str | None]]:
        conn = await asyncpg.connect(pg_dsn)
        try:
            rows = await conn.fetch(
                f"""SELECT type, min(status) AS status, max(attempts) AS attempts,
                           min(last_error) AS error,
                           bool_and(status IN ('completed', 'failed')) AS final
                    FROM "{schema}".jobs GROUP BY type"""
            )
            return {r["type"]: (r["status"], r["attempts"], r["error"]) for r in rows if r["final"]}
        finally:
            await conn.close()

    # The job that kills its process has a queue and workers of its own, so that it
    # cannot take the other jobs' attempts down with it.
    supervisor = spawn(["worker", "--processes", "2"], {**env, "JOBQUEUE_QUEUES": "lethal"})
    supervisor.wait_for_output("Started 2 worker processes")
    others = spawn(["worker"], {**env, "JOBQUEUE_QUEUES": "default"})
    others.wait_for_output("worker started")
    asyncio.run(fill())
    deadline = time.monotonic() + 90
    while len(found := asyncio.run(outcome())) < 5:
        assert time.monotonic() < deadline, (found, supervisor.output[-3000:])
        time.sleep(0.3)
    assert found["ok"] == ("completed", 1, None)
    assert found["boom"] == ("failed", 2, "ValueError: poison")
    assert found["hang"] == ("failed", 2, "job exceeded its timeout of 0.5s")
    assert found["exit"] == ("failed", 2, "worker lost (lease expired)")
    # A sync endless loop, run isolated: killed at its timeout, not left spinning.
    assert found["spin"] == ("failed", 2, "job exceeded its timeout of 0.5s")
    assert supervisor.output.count("exited with code 3") == 2  # once per attempt
    supervisor.popen.send_signal(signal.SIGTERM)
    assert supervisor.popen.wait(30) == 0
    assert others.stop() == 0


def test_a_process_started_during_an_outage_waits_for_the_database(
    tmp_path: Path, spawn: Spawn
) -> None:
    from jobqueue.db.embedded import EmbeddedPostgres
    from tests.conftest import free_ports

    # Two different ports: the API's must not be the stopped server's, which it takes again.
    pg_port, port = free_ports(2, besides=0)
    server = EmbeddedPostgres(tmp_path / "pg", port=pg_port)
    dsn = server.start()
    server.stop()
    env = {**os.environ, "DATABASE_URL": dsn, "PORT": str(port)}
    try:
        serve = spawn(["serve"], env, name="serve")
        workers = spawn(["worker", "--processes", "2"], env, name="workers")
        serve.wait_for_output("Database unavailable; retrying in")
        workers.wait_for_output("Database unavailable; retrying in")
        server.start()
        serve.wait_http(f"http://127.0.0.1:{port}", timeout=30)
        workers.wait_for_output("Started 2 worker processes", timeout=30)
        r = httpx.post(f"http://127.0.0.1:{port}/jobs", json={"type": "noop"})
        assert r.status_code == 201
        assert serve.stop() == 0
        assert workers.stop() == 0
    finally:
        server.stop()


def test_graceful_then_forced_with_50_jobs_in_flight(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    env.update(JOBQUEUE_APP="jobqueue.demo:jq", WORKER_COUNT="50")

    async def fill(seconds: list[float]) -> None:
        conn = await asyncpg.connect(pg_dsn)
        try:
            await conn.executemany(
                f"""INSERT INTO "{schema}".jobs (type, payload)
                    VALUES ('sleep', jsonb_build_object('seconds', $1::float8))""",
                [(s,) for s in seconds],
            )
        finally:
            await conn.close()

    async def jobs() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(pg_dsn)
        try:
            return await conn.fetch(
                f"""SELECT id, status, attempts, (payload->>'seconds')::float8 AS seconds
                    FROM "{schema}".jobs ORDER BY id"""
            )
        finally:
            await conn.close()

    # Graceful: 25 short jobs finish within the 3 s grace; 25 long ones are handed back.
    worker = spawn(["worker", "--shutdown-timeout", "3"], env, name="graceful")
    worker.wait_for_output("worker started")
    asyncio.run(fill([1.0] * 25 + [60.0] * 25))
    deadline = time.monotonic() + 20
    while worker.output.count("job.started") < 50:
        assert time.monotonic() < deadline, worker.output[-2000:]
        time.sleep(0.05)
    worker.popen.send_signal(signal.SIGTERM)
    assert worker.popen.wait(30) == 0
    rows = asyncio.run(jobs())
    assert {(r["status"], r["attempts"]) for r in rows if r["seconds"] == 1.0} == {("completed", 1)}
    assert {(r["status"], r["attempts"]) for r in rows if r["seconds"] == 60.0} == {("pending", 0)}

    # Forced: a second SIGTERM ends the grace period at once; nothing is lost.
    forced = spawn(["worker", "--shutdown-timeout", "60"], env, name="forced")
    deadline = time.monotonic() + 20
    while forced.output.count("job.started") < 25:
        assert time.monotonic() < deadline, forced.output[-2000:]
        time.sleep(0.05)
    forced.popen.send_signal(signal.SIGTERM)
    forced.wait_for_output("Shutting down: waiting up to 60s")
    second = time.monotonic()
    forced.popen.send_signal(signal.SIGTERM)
    assert forced.popen.wait(30) == 0
    took = time.monotonic() - second
    assert took < 5, took  # not the 60 s grace period
    rows = asyncio.run(jobs())
    assert {(r["status"], r["attempts"]) for r in rows if r["seconds"] == 60.0} == {("pending", 0)}
    print(f"\nforced stop: exited {took:.2f}s after the second SIGTERM, 25 jobs handed back")
