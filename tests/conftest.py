"""Fixtures: a real PostgreSQL (JOBQUEUE_TEST_DATABASE_URL, else the embedded server)
and a freshly migrated schema per test."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.db.embedded import EmbeddedPostgres
from jobqueue.db.migrate import migrate
from jobqueue.job import FINAL_STATES, Job
from jobqueue.worker import Worker

ROOT = Path(__file__).resolve().parent.parent
APPS = Path(__file__).resolve().parent / "apps"


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def pg_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("JOBQUEUE_TEST_DATABASE_URL")
    if url:
        yield url
        return
    server = EmbeddedPostgres(tmp_path_factory.mktemp("embedded"))
    yield server.start()
    server.stop()


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    """A schema of its own for each test, migrated, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"

    async def setup() -> None:
        conn = await asyncpg.connect(pg_dsn)
        try:
            await migrate(conn, name)
        finally:
            await conn.close()

    async def teardown() -> None:
        conn = await asyncpg.connect(pg_dsn)
        try:
            await conn.execute(f'DROP SCHEMA "{name}" CASCADE')
        finally:
            await conn.close()

    asyncio.run(setup())
    yield name
    asyncio.run(teardown())


@pytest.fixture
def settings(pg_dsn: str, schema: str) -> Settings:
    return Settings(database_url=pg_dsn, schema=schema, poll_interval=0.2, retry_delay=0.2)


@pytest.fixture
async def jq(settings: Settings) -> AsyncIterator[JobQueue]:
    queue = JobQueue(settings=settings)
    async with queue:
        yield queue


@pytest.fixture
async def db(pg_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(pg_dsn)
    yield conn
    await conn.close()


@pytest.fixture
def env(pg_dsn: str, schema: str) -> dict[str, str]:
    """Environment for a jobqueue subprocess on this test's schema."""
    return {
        **os.environ,
        "DATABASE_URL": pg_dsn,
        "JOBQUEUE_SCHEMA": schema,
        "PORT": str(free_port()),
        "POLL_INTERVAL_SECONDS": "0.2",
        "PYTHONPATH": f"{APPS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Process:
    """A command running as a real subprocess (``python -m <module> args``, by default
    jobqueue's), its output in a file."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str],
        log: Path,
        *,
        module: str = "jobqueue",
        cwd: Path | None = None,
    ) -> None:
        self.log_path = log
        self._log = log.open("wb")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=cwd or log.parent,
        )

    @property
    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_output(self, text: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if self.popen.poll() is not None:
                raise AssertionError(f"process exited before printing {text!r}:\n{self.output}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not printed within {timeout}s:\n{self.output}")
            time.sleep(0.05)

    def wait_http(self, base_url: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.popen.poll() is not None:
                raise AssertionError(f"server exited early:\n{self.output}")
            try:
                if httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"server not up within {timeout}s:\n{self.output}")
            time.sleep(0.05)

    def stop(self) -> int:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self.close()
        return self.popen.returncode

    def close(self) -> None:
        self._log.close()


Spawn = Callable[..., Process]


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    """Start subprocesses (jobqueue's, unless ``module`` says otherwise); any still
    running at the end are killed."""
    started: list[Process] = []

    def start(
        args: list[str],
        env: dict[str, str],
        name: str = "jobqueue",
        *,
        module: str = "jobqueue",
        cwd: Path | None = None,
    ) -> Process:
        log = tmp_path / f"{name}-{len(started)}.log"
        proc = Process(args, env, log, module=module, cwd=cwd)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.popen.poll() is None:
            proc.popen.kill()
            proc.popen.wait()
        proc.close()


# -- an in-process worker, and waiting for a job to finish ------------------------------

StartWorker = Callable[..., Awaitable[Worker]]


@pytest.fixture
async def start_worker(jq: JobQueue) -> AsyncIterator[StartWorker]:
    workers: list[Worker] = []

    async def start(**overrides: Any) -> Worker:
        settings = dataclasses.replace(jq.settings, **overrides)
        worker = Worker(await jq.pool(), jq.dsn, settings, jq.tasks)
        await worker.start()
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        await worker.stop(asyncio.Event())


async def wait_final(jq: JobQueue, job_id: int, timeout: float = 15) -> Job:
    deadline = time.monotonic() + timeout
    while True:
        job = await jq.get(job_id)
        assert job is not None
        if job.status in FINAL_STATES:
            return job
        assert time.monotonic() < deadline, f"job {job_id} still {job.status}"
        await asyncio.sleep(0.02)


@pytest.fixture
async def api_client(jq: JobQueue) -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP API of ``jq`` in-process (no worker, any job type accepted). Behaviour
    that depends on a real server (signals, concurrency) uses ``spawn`` instead."""
    from jobqueue.api import create_app

    app = create_app(jq, check_types=False)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        yield client


def add_ok_and_bad_tasks(jq: JobQueue) -> None:
    """Two tasks: "ok" succeeds, "bad" fails on its only attempt."""

    @jq.task("ok")
    async def ok(payload: dict[str, Any]) -> None:
        pass

    @jq.task("bad", max_attempts=1)
    async def bad(payload: dict[str, Any]) -> None:
        raise RuntimeError("no")
