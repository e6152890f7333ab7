"""A primary and a synchronous streaming standby, made of the embedded PostgreSQL
binaries, for failover tests and the failover benchmark.

    with Replicated.make(tmp_path) as pair:   # ReplicationUnavailable where it cannot be
        pair.dsn                              # both hosts, target_session_attrs=read-write
        pair.crash()                          # pg_ctl stop -m immediate on the primary
        pair.recover()                        # pg_ctl promote: the standby takes over

``Lone`` is the reference a failover is measured against: one server, which crashes
the same way and recovers by starting again on its port.

The standby is a ``pg_basebackup`` of the primary with ``standby.signal`` and a
``primary_conninfo``; the primary names it in ``synchronous_standby_names`` with
``synchronous_commit = on``, so that a commit is acknowledged only once the standby
has flushed it: whatever a client was told is stored survives the primary's loss.

Each server is an :class:`EmbeddedPostgres` on a data directory of its own, run as
the user PostgreSQL accepts (the same as the embedded server's), with a fixed port,
and stopped when the pair's ``with`` block ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from jobqueue.db.embedded import EmbeddedPostgres, EmbeddedPostgresError
from tests.conftest import free_ports

STANDBY_NAME = "standby"  # its application_name, as synchronous_standby_names lists it


class ReplicationUnavailable(Exception):
    """A primary with a synchronous standby cannot be made here (no binaries, a sandbox)."""


@dataclass
class Node:
    server: EmbeddedPostgres
    root: Path  # its data directory: pgdata/ and postgres.log
    port: int

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def pgdata(self) -> Path:
        return self.root / "pgdata"


class Replicated:
    def __init__(self, primary: Node, standby: Node) -> None:
        self.primary = primary
        self.standby = standby
        self.promoted = False

    @property
    def dsn(self) -> str:
        """Both servers, primary first: a client connects to whichever accepts writes."""
        return (
            f"postgresql://postgres@127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
            "/postgres?target_session_attrs=read-write"
        )

    @property
    def current_dsn(self) -> str:
        """The server that accepts writes now (the test's own view, never cut off)."""
        return (self.standby if self.promoted else self.primary).dsn

    @classmethod
    @contextlib.contextmanager
    def make(cls, root: Path) -> Iterator[Replicated]:
        first, second = free_ports(2, besides=0)
        primary = Node(EmbeddedPostgres(root / "primary", port=first), root / "primary", first)
        standby = Node(EmbeddedPostgres(root / "standby", port=second), root / "standby", second)
        try:
            try:
                primary.server.start()
                _clone(primary, standby)
                standby.server.start()
                asyncio.run(_require_synchronous(primary.dsn))
            except (EmbeddedPostgresError, OSError, subprocess.CalledProcessError) as exc:
                raise ReplicationUnavailable(str(exc)) from exc
            yield cls(primary, standby)
        finally:
            for node in (standby, primary):
                with contextlib.suppress(EmbeddedPostgresError):
                    node.server.stop()

    @property
    def setup_dsn(self) -> str:
        return self.primary.dsn

    def crash(self) -> None:
        """The primary crashes: every backend is gone at once, nothing is flushed."""
        _crash(self.primary)

    def recover(self) -> None:
        """The standby ends recovery and accepts writes (``-w``: once it does)."""
        _pg_ctl(self.standby, "promote", "-w")
        self.promoted = True


class Lone:
    """One server, for the reference figures: it crashes and is started again."""

    def __init__(self, node: Node) -> None:
        self.node = node

    @property
    def dsn(self) -> str:
        return self.node.dsn

    setup_dsn = current_dsn = dsn

    @classmethod
    @contextlib.contextmanager
    def make(cls, root: Path) -> Iterator[Lone]:
        port = free_ports(1, besides=0)[0]
        node = Node(EmbeddedPostgres(root / "lone", port=port), root / "lone", port)
        try:
            node.server.start()
            yield cls(node)
        finally:
            with contextlib.suppress(EmbeddedPostgresError):
                node.server.stop()

    def crash(self) -> None:
        _crash(self.node)

    def recover(self) -> None:
        """Started again on its port; it accepts connections once crash recovery is done."""
        self.node.server.start()


def _crash(node: Node) -> None:
    _pg_ctl(node, "stop", "-m", "immediate", "-w")
    node.server.stop()  # reaps the process and releases its keeper thread


def _clone(primary: Node, standby: Node) -> None:
    """The standby's data directory: a base backup of the primary, set to follow it.

    Not ``pg_basebackup -R``: its primary_conninfo carries no application_name, which
    synchronous_standby_names must name. The primary's own settings are copied too, so
    the standby is told to wait for no standby of its own: once promoted it is alone,
    and a primary waiting for a synchronous standby that never comes never commits.
    """
    standby.root.mkdir(parents=True, exist_ok=True)
    _run(
        primary,
        "pg_basebackup", "-D", str(standby.pgdata), "-h", "127.0.0.1", "-p", str(primary.port),
        "-U", "postgres", "-X", "stream", "-c", "fast",
    )  # fmt: skip
    conninfo = f"host=127.0.0.1 port={primary.port} user=postgres application_name={STANDBY_NAME}"
    with (standby.pgdata / "postgresql.auto.conf").open("a") as conf:
        conf.write(f"primary_conninfo = '{conninfo}'\nsynchronous_standby_names = ''\n")
    (standby.pgdata / "standby.signal").touch()


async def _require_synchronous(dsn: str, timeout: float = 30.0) -> None:
    """Make the standby synchronous, and return once the primary says it is."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'")
        await conn.execute("ALTER SYSTEM SET synchronous_commit = 'on'")
        await conn.execute("SELECT pg_reload_conf()")
        deadline = time.monotonic() + timeout
        while not await conn.fetchval(
            "SELECT EXISTS (SELECT FROM pg_stat_replication"
            "               WHERE application_name = $1 AND sync_state = 'sync')",
            STANDBY_NAME,
        ):
            if time.monotonic() > deadline:
                raise ReplicationUnavailable(f"the standby was not synchronous in {timeout}s")
            await asyncio.sleep(0.05)
    finally:
        await conn.close()


def _pg_ctl(node: Node, *args: str) -> None:
    _run(node, "pg_ctl", "-D", str(node.pgdata), *args)


def _run(node: Node, program: str, *args: str) -> None:
    """One of the server's programs, run as the user its server runs as (PostgreSQL
    refuses root), with its output appended to the server's log."""
    runner = node.server._choose_runner()  # how the embedded server itself is started
    with (node.root / "postgres.log").open("ab") as log:
        subprocess.run(
            runner.command(program, *args),
            stdout=log,
            stderr=log,
            timeout=60,
            check=True,
            **runner.options(node.root),
        )
