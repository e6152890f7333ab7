"""`jobqueue worker --processes N`: N worker processes, because one Python process
runs Python code on one core at a time (the GIL).

The supervisor finds the database once (starting the embedded server if that is
the default), migrates once, and starts the workers with the resolved settings.
It holds the host's one LISTEN connection and relays its wake-ups to the workers
over their stdin (jobqueue.wakeups). It forwards SIGINT/SIGTERM to them (a second
signal too, which cuts their grace period short) and exits 0 when all of them did.
A worker that dies on its own (a crash, the OOM killer) is started again; its jobs
come back after their lease.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from jobqueue import config, wakeups
from jobqueue.config import Settings
from jobqueue.db.migrate import migrate
from jobqueue.db.pool import connect_session, is_unavailable, resolve_dsn
from jobqueue.logs import get_logger

log = get_logger("jobqueue.supervisor")

RESTART_DELAY_SECONDS = 1.0
_PR_SET_PDEATHSIG = 1


def run(settings: Settings, processes: int) -> int:
    dsn, embedded = resolve_dsn(settings.database_url, settings.data_path)
    try:
        if settings.migrate:
            migrate_when_reachable(settings, dsn)
        # The embedded server: each worker joins it itself, and so finds it again if its
        # owner (`jobqueue serve`) restarts it on another port.
        database_url = dsn if embedded is None else None
        env = child_environment(settings, database_url) | {wakeups.RELAYED: "1"}
        relay = wakeups.Relay(settings.direct_dsn(dsn), settings.schema)
        relay.start()
        try:
            if settings.metrics == "on" and settings.metrics_port is not None:
                from jobqueue.observability.metrics import ChildrenMetrics

                metrics = ChildrenMetrics(settings)
                try:
                    env = metrics.environment(env)
                    return Supervisor(env, processes, relay, metrics.exited).run()
                finally:
                    metrics.close()
            return Supervisor(env, processes, relay).run()
        finally:
            relay.stop()
    finally:
        if embedded is not None:
            embedded.stop()


def migrate_when_reachable(settings: Settings, dsn: str) -> None:
    """Migrate, waiting out a database outage as every worker does (a signal meanwhile
    ends the supervisor, with nothing started yet)."""
    backoff = 0.5
    while True:
        try:
            asyncio.run(_migrate(settings, dsn))
            return
        except Exception as exc:
            if not is_unavailable(exc):
                raise
            log.warning(f"Database unavailable; retrying in {backoff:g}s", error=str(exc))
            time.sleep(backoff)
            backoff = min(backoff * 2, 5.0)


async def _migrate(settings: Settings, dsn: str) -> None:
    conn = await connect_session(settings.direct_dsn(dsn), dsn)
    try:
        await migrate(conn, settings.schema)
    finally:
        await conn.close()


def child_environment(settings: Settings, dsn: str | None) -> dict[str, str]:
    """The settings as environment variables, so that every worker runs with exactly the
    supervisor's settings, flags included; DATABASE_URL the resolved ``dsn``, or unset
    (None) for the embedded server of JOBQUEUE_DATA_DIR."""
    env = dict(os.environ)
    for f in config.env_settings():
        value = getattr(settings, f.name)
        name = f.metadata["env"]
        if value is None and f.default is not None:  # "none" spelled so it parses back
            env[name] = config.NONE_SPELLING[f.metadata["parse"]]
        elif value is None:
            env.pop(name, None)
        else:
            env[name] = ",".join(value) if isinstance(value, tuple) else str(value)
    if dsn is None:
        env.pop("DATABASE_URL", None)
    else:
        env["DATABASE_URL"] = dsn
    return env


class Supervisor:
    def __init__(
        self,
        env: dict[str, str],
        processes: int,
        relay: wakeups.Relay,
        on_exit: Callable[[int], None] = lambda pid: None,
    ) -> None:
        """``relay``: wakes the workers, over their stdin. ``on_exit``: told the pid of
        each worker process that ended."""
        self._env = env
        self._processes = processes
        self._relay = relay
        self._on_exit = on_exit
        self._children: list[subprocess.Popen[bytes]] = []
        self._signals: list[int] = []

    def run(self) -> int:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda signum, _: self._signals.append(signum))
        self._children = [self._start() for _ in range(self._processes)]
        log.info(
            f"Started {self._processes} worker processes",
            pids=",".join(str(c.pid) for c in self._children),
        )
        forwarded = 0
        while any(c.poll() is None for c in self._children):
            if len(self._signals) > forwarded:
                self._forward(self._signals[forwarded])
                forwarded += 1
            elif not self._signals:
                self._restart_dead()
            time.sleep(0.05)
        codes = [c.returncode for c in self._children]
        log.info("All worker processes stopped", exit_codes=",".join(map(str, codes)))
        # A worker signalled while still starting dies by the signal itself, before its
        # handlers exist; it had claimed nothing, so that is a clean stop too.
        clean = {0, *(-signum for signum in self._signals)}
        return 0 if all(code in clean for code in codes) else 1

    def _start(self) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(
            [sys.executable, "-m", "jobqueue", "worker", "--no-migrate"],
            env=self._env,
            stdin=subprocess.PIPE,
            preexec_fn=_stop_with_parent(),
        )
        assert child.stdin is not None
        self._relay.attach(child.stdin)
        return child

    def _forward(self, signum: int) -> None:
        for child in self._children:
            if child.poll() is None:
                child.send_signal(signum)

    def _restart_dead(self) -> None:
        for i, child in enumerate(self._children):
            if child.poll() is not None:
                self._on_exit(child.pid)
                if child.stdin is not None:
                    self._relay.detach(child.stdin)
                log.warning(
                    f"Worker process {child.pid} exited with code {child.returncode}; "
                    f"starting another in {RESTART_DELAY_SECONDS:g}s"
                )
                time.sleep(RESTART_DELAY_SECONDS)
                if not self._signals:
                    self._children[i] = self._start()
                    log.info(f"Started worker process {self._children[i].pid}")


def _stop_with_parent() -> Callable[[], None]:
    """A preexec_fn: a worker gets SIGTERM, and so shuts down gracefully, if the
    supervisor dies without forwarding a signal (SIGKILL, a crash)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))

    return preexec
