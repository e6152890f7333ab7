"""Backends killed under load: every connection jobqueue holds (the worker's, the API's
and the application's own JobQueue) is terminated five times a second while jobs are
enqueued over HTTP and from Python and run."""

from __future__ import annotations

import asyncio
import collections
import os
import random
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import asyncpg
import httpx
import pytest

from jobqueue import EnqueueFailed, EnqueueOutcomeUnknown, JobQueue
from jobqueue.config import Settings
from jobqueue.db.migrate import migrate
from tests.apps.ledger_app import create_ledger
from tests.conftest import APPS, Process, Spawn, client_ports, free_port

KILL_EVERY = 0.2
KILL_FOR = 20.0
LEASE = 2.0
RESCUE_INTERVAL = 0.5
# A loop's outage is one warning line; a traceback or an [error] is a bug.
UNCLASSIFIED = re.compile(r"\[error|Traceback|InternalClientError")


@dataclass
class Tally:
    """What the enqueuing callers saw."""

    jobs: list[int] = field(default_factory=list)
    calls: int = 0
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    unexpected: list[str] = field(default_factory=list)


def database_dsn(dsn: str, database: str) -> str:
    return dsn.rsplit("/", 1)[0] + "/" + database


@pytest.fixture
def killable_db(pg_dsn: str) -> Iterator[str]:
    """A database of its own: what is terminated is this test's, never another's."""
    name = f"kills_{uuid.uuid4().hex[:10]}"

    async def run(sql: str) -> None:
        conn = await asyncpg.connect(pg_dsn)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run(f'CREATE DATABASE "{name}"'))
    yield database_dsn(pg_dsn, name)
    asyncio.run(run(f'DROP DATABASE "{name}" WITH (FORCE)'))


@pytest.mark.slow
def test_backends_killed_under_load_lose_no_job_and_log_no_error(
    killable_db: str, spawn: Spawn
) -> None:
    dsn, schema = killable_db, "jobqueue"
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "JOBQUEUE_SCHEMA": schema,
        "JOBQUEUE_APP": "ledger_app:jq",
        "WORKER_COUNT": "20",
        "POLL_INTERVAL_SECONDS": "0.5",
        "JOBQUEUE_LEASE_SECONDS": str(LEASE),
        "JOBQUEUE_RESCUE_INTERVAL": str(RESCUE_INTERVAL),
        "RETRY_DELAY_SECONDS": "0",
        "MAX_ATTEMPTS": "25",  # a job survives its completion write being cut many times
        "PYTHONPATH": f"{APPS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }

    async def prepare() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await migrate(conn, schema)
            await create_ledger(conn, schema)
        finally:
            await conn.close()

    asyncio.run(prepare())
    port = free_port()
    api = spawn(["api"], {**env, "PORT": str(port)}, name="api")
    worker = spawn(["worker"], env, name="worker")
    base = f"http://127.0.0.1:{port}"
    api.wait_http(base)
    worker.wait_for_output("worker started")

    ours = [os.getpid(), api.popen.pid, worker.popen.pid]
    tally, kills = asyncio.run(load_while_killing(dsn, schema, base, ours))

    done, ledger = asyncio.run(completed_and_ledger(dsn, schema, tally.jobs, worker))
    logs = {"api": api.output, "worker": worker.output}
    assert api.stop() == 0
    assert worker.stop() == 0

    print(
        f"\nbackend kills: {kills['rounds']} rounds, {kills['backends']} backends killed; "
        f"{tally.calls} enqueue calls, {len(tally.jobs)} jobs returned, "
        f"errors {dict(tally.errors)}; {done} jobs completed; unexpected errors "
        f"{dict(collections.Counter(e.split(':')[0] for e in tally.unexpected))}"
    )
    assert tally.unexpected == [], tally.unexpected[:10]
    for name, log in logs.items():
        bad = [line for line in log.splitlines() if UNCLASSIFIED.search(line)]
        assert bad == [], f"{name}: {bad[:5]}\n{log[-3000:]}"
    assert kills["backends"] > kills["rounds"]  # each round found jobqueue's connections
    assert len(tally.jobs) > 1000
    runs = collections.Counter((r["job_id"], r["attempt"]) for r in ledger)
    assert [key for key, n in runs.items() if n > 1] == []  # no attempt ran twice
    assert set(tally.jobs) <= {job_id for job_id, _ in runs}  # every job ran


async def load_while_killing(
    dsn: str, schema: str, base: str, ours: list[int]
) -> tuple[Tally, dict[str, int]]:
    """``ours``: the processes whose server connections are killed (this one's, the
    API's and the worker's), and no other test's that shares the server."""
    tally = Tally()
    kills = {"rounds": 0, "backends": 0}
    stop = asyncio.Event()
    rng = random.Random(11)
    async with (
        JobQueue(settings=Settings(database_url=dsn, schema=schema)) as jq,
        httpx.AsyncClient(base_url=base, timeout=30) as client,
    ):

        async def call(enqueue: Callable[[], Awaitable[list[int]]]) -> None:
            tally.calls += 1
            try:
                tally.jobs.extend(await enqueue())
            except (EnqueueFailed, EnqueueOutcomeUnknown) as exc:
                tally.errors[type(exc).__name__] += 1
            except Exception as exc:
                tally.unexpected.append(f"{type(exc).__module__}.{type(exc).__name__}: {exc}")

        async def one() -> list[int]:
            return [(await jq.enqueue("record", {})).id]

        async def many() -> list[int]:
            return await jq.enqueue_many("record", [{}] * rng.randint(2, 20))

        async def over_http() -> list[int]:
            r = await client.post("/jobs", json={"type": "record"})
            if r.status_code == 201:
                return [int(r.json()["id"])]
            if r.status_code == 503 and r.json().get("stored") in (False, "unknown"):
                stored = r.json()["stored"]
                raise (EnqueueFailed if stored is False else EnqueueOutcomeUnknown)(r.text)
            raise AssertionError(f"POST /jobs: {r.status_code} {r.text}")

        async def callers(enqueue: Callable[[], Awaitable[list[int]]], every: float) -> None:
            # Calls overlap (a slow one does not hold back the next), as callers do.
            running: set[asyncio.Task[None]] = set()
            while not stop.is_set():
                task = asyncio.create_task(call(enqueue))
                running.add(task)
                task.add_done_callback(running.discard)
                await asyncio.sleep(every)
            await asyncio.gather(*running)

        async def killer(conn: asyncpg.Connection) -> None:
            ends = time.monotonic() + KILL_FOR
            while time.monotonic() < ends:
                killed = await conn.fetchval(
                    """SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                       WHERE datname = current_database() AND pid <> pg_backend_pid()
                         AND application_name LIKE 'jobqueue%'
                         AND client_port = ANY($1::int[])""",
                    sorted(client_ports(ours)),
                )
                kills["rounds"] += 1
                kills["backends"] += killed
                await asyncio.sleep(KILL_EVERY)
            stop.set()

        conn = await asyncpg.connect(dsn)
        try:
            await asyncio.gather(
                killer(conn),
                callers(one, 0.01),
                callers(many, 0.05),
                callers(over_http, 0.02),
            )
        finally:
            await conn.close()
    return tally, kills


async def completed_and_ledger(
    dsn: str, schema: str, ids: list[int], worker: Process
) -> tuple[int, list[asyncpg.Record]]:
    """Once every job in ``ids`` completed: how many jobs completed, and the ledger."""
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + 90
        while left := await conn.fetchval(
            f"""SELECT count(*) FROM "{schema}".jobs
                WHERE id = any($1::bigint[]) AND status <> 'completed'""",
            ids,
        ):
            assert time.monotonic() < deadline, f"{left} not completed\n{worker.output[-3000:]}"
            await asyncio.sleep(0.2)
        done: int = await conn.fetchval(
            f"SELECT count(*) FROM \"{schema}\".jobs WHERE status = 'completed'"
        )
        ledger = await conn.fetch(f'SELECT job_id, attempt FROM "{schema}".ledger')
        return done, ledger
    finally:
        await conn.close()
