"""Fixtures shared by every kind of test: a real PostgreSQL (JOBQUEUE_TEST_DATABASE_URL,
else the embedded server) and a freshly migrated schema per test, and real jobqueue
subprocesses.

The directory a test lives in says what it needs, and marks it so (``-m unit`` and so
on): unit/ nothing but Python, no database at all; integration/ a real PostgreSQL,
in this process; acceptance/ real jobqueue processes and real HTTP; faults/ real
processes killed, frozen or cut off."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from pathlib import Path

import asyncpg
import httpx
import psycopg
import pytest

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.db.embedded import EmbeddedPostgres
from jobqueue.db.migrate import migrate
from jobqueue.model.job import Job

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
APPS = TESTS / "apps"
KINDS = ("unit", "integration", "acceptance", "faults")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not item.path.is_relative_to(TESTS):
            continue
        kind = item.path.relative_to(TESTS).parts[0]
        if kind not in KINDS:
            raise pytest.UsageError(f"{item.nodeid}: a test belongs in one of {', '.join(KINDS)}")
        # Every fixture that reaches the database depends on pg_dsn: a unit test that
        # asked for one would start the embedded server, or fail without a server.
        if kind == "unit" and "pg_dsn" in item.fixturenames:
            raise pytest.UsageError(f"{item.nodeid} is a unit test but needs the database")
        if kind != "faults" and item.get_closest_marker("faults"):
            raise pytest.UsageError(f"{item.nodeid} is marked faults: it belongs in faults/")
        item.add_marker(kind)


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
    # No gc.freeze in the test process: each in-process worker's start would freeze that
    # test's objects, and what became cyclic garbage after it would never be freed
    # (tests/integration/test_gc_freeze.py holds the freeze itself).
    return Settings(
        database_url=pg_dsn, schema=schema, poll_interval=0.2, retry_delay=0.2, gc_freeze=False
    )


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


# A role made for a test: its name, and the DSN that connects as it.
MakeRole = Callable[[str], tuple[str, str]]


@pytest.fixture
def make_role(pg_dsn: str, env: dict[str, str]) -> Iterator[MakeRole]:
    """Roles given what `jobqueue grants --for PURPOSE` prints for this test's schema;
    dropped, with their privileges, after the test (roles are the cluster's, not the
    schema's). The server trusts local connections: no password."""
    made: list[str] = []

    def make(purpose: str) -> tuple[str, str]:
        name = f"jq_{purpose}_{uuid.uuid4().hex[:8]}"
        printed = jobqueue(env, "grants", "--role", name, "--for", purpose)
        assert printed.returncode == 0, printed.stderr
        # A sync driver: the roles of an async test are made inside its event loop.
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'CREATE ROLE "{name}" LOGIN')
            made.append(name)
            conn.execute(printed.stdout)
        return name, dsn_as(pg_dsn, name)

    yield make
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for name in made:
            conn.execute(f'DROP OWNED BY "{name}"; DROP ROLE "{name}"')


def dsn_as(dsn: str, user: str) -> str:
    """``dsn`` with another user (and no password)."""
    parts = urllib.parse.urlsplit(dsn)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}@{host}"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def free_ports(count: int, *, besides: int) -> list[int]:
    """``count`` free ports, all different and none ``besides`` (a port chosen before
    for a process that may not have bound it yet: free_port alone could return it
    again, and two servers of one test then met on one port)."""
    with contextlib.ExitStack() as held:
        ports: list[int] = []
        while len(ports) < count:
            s = held.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))
            if s.getsockname()[1] != besides:
                ports.append(s.getsockname()[1])
        return ports


def client_ports(pids: Iterable[int]) -> set[int]:
    """The local TCP ports of the sockets these processes hold: for pg_stat_activity's
    client_port, to tell their server connections from other tests' (through /proc)."""
    inodes = set()
    for pid in pids:
        with contextlib.suppress(OSError):  # a process that has just ended
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes.add(int(target[8:-1]))
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[9]) in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


class Process:
    """A command running as a real subprocess (``python -m <module> args``, by default
    jobqueue's), its output in a file; ``prefix`` runs it through another command, such
    as ``ip netns exec NAME`` (which must exec it, so that the pid and signals are its)."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str],
        log: Path,
        *,
        module: str = "jobqueue",
        cwd: Path | None = None,
        prefix: Sequence[str] = (),
        python: str = sys.executable,
    ) -> None:
        self.log_path = log
        self._log = log.open("wb")
        self.popen = subprocess.Popen(
            [*prefix, python, "-m", module, *args],
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


def fetch(dsn: str, sql: str, *args: object) -> list[asyncpg.Record]:
    """``sql``'s rows, on a connection of its own, for a synchronous test."""

    async def go() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(dsn)
        try:
            return await conn.fetch(sql, *args)
        finally:
            await conn.close()

    return asyncio.run(go())


def jobqueue(
    env: dict[str, str], *args: str, python: str = sys.executable
) -> subprocess.CompletedProcess[str]:
    """``jobqueue ARGS`` run to its end by ``python``, its output captured."""
    return subprocess.run(
        [python, "-m", "jobqueue", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


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
        prefix: Sequence[str] = (),
        python: str = sys.executable,
    ) -> Process:
        log = tmp_path / f"{name}-{len(started)}.log"
        proc = Process(args, env, log, module=module, cwd=cwd, prefix=prefix, python=python)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.popen.poll() is None:
            proc.popen.kill()
            proc.popen.wait()
        proc.close()


# -- for synchronous tests: one job at a time, on a JobQueue of its own -----------------


def enqueue(settings: Settings, type: str, payload: dict[str, object]) -> Job:
    async def go() -> Job:
        async with JobQueue(settings=settings) as jq:
            return await jq.enqueue(type, payload)

    return asyncio.run(go())


def get(settings: Settings, job_id: int) -> Job:
    async def go() -> Job:
        async with JobQueue(settings=settings) as jq:
            job = await jq.get(job_id)
            assert job is not None
            return job

    return asyncio.run(go())


async def dead_letters(
    db: asyncpg.Connection, schema: str, rows: list[tuple[str, str, int]]
) -> list[int]:
    """Failed jobs as (type, queue, hours since they failed)."""
    ids = []
    for type_, queue, hours_ago in rows:
        ids.append(
            await db.fetchval(
                f"""INSERT INTO "{schema}".jobs (type, queue, status, attempts, last_error,
                                                 finished_at)
                    VALUES ($1, $2, 'failed', 3, 'boom', now() - make_interval(hours => $3))
                    RETURNING id""",
                type_,
                queue,
                hours_ago,
            )
        )
    return ids
