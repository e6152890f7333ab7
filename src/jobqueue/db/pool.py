"""Connections: where the database is, how a connection is set up, which errors mean "down"."""

from __future__ import annotations

from typing import Any

import asyncpg

from jobqueue.config import Settings
from jobqueue.db.embedded import EmbeddedPostgres

# Half-open TCP connections (a host that vanished without a FIN) are noticed
# within about 30 s instead of the kernel's default two hours.
KEEPALIVE_SETTINGS = {
    "tcp_keepalives_idle": "10",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
}


def resolve_dsn(settings: Settings) -> tuple[str, EmbeddedPostgres | None]:
    """The DSN to use, starting (or attaching to) the embedded server when none is set."""
    if settings.database_url:
        return settings.database_url, None
    server = EmbeddedPostgres(settings.data_path)
    return server.start(), server


async def keep_session(conn: asyncpg.Connection) -> None:
    """Release a connection to the pool without the default reset query.

    asyncpg still rolls back an open transaction; the reset query (UNLISTEN, RESET
    ALL, advisory unlock) would only cost a round trip per query, and our pooled
    connections keep no such state: LISTEN has its own connection, and the
    migration lock is released before its connection returns.
    """


async def create_pool(
    dsn: str, *, min_size: int = 1, max_size: int = 10, statement_timeout: float = 30.0
) -> asyncpg.Pool:
    pool: asyncpg.Pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        reset=keep_session,
        server_settings={
            "application_name": "jobqueue",
            # Every query of the runtime takes milliseconds; one stuck behind a lock or
            # a sick server fails after this instead of holding a worker or a request.
            "statement_timeout": f"{int(statement_timeout * 1000)}ms",
            **KEEPALIVE_SETTINGS,
        },
    )
    return pool


async def connect(dsn: str, application_name: str = "jobqueue") -> asyncpg.Connection:
    conn: asyncpg.Connection = await asyncpg.connect(
        dsn, server_settings={"application_name": application_name, **KEEPALIVE_SETTINGS}
    )
    return conn


def is_unavailable(exc: BaseException) -> bool:
    """True for errors that mean the database cannot be reached right now (retry later)."""
    unavailable: tuple[type[BaseException], ...] = (
        OSError,
        asyncpg.QueryCanceledError,  # statement_timeout: the server is too slow to answer
        TimeoutError,
        asyncpg.PostgresConnectionError,
        asyncpg.InterfaceError,
        asyncpg.CannotConnectNowError,
        asyncpg.AdminShutdownError,
        asyncpg.CrashShutdownError,
        asyncpg.TooManyConnectionsError,
    )
    return isinstance(exc, unavailable)


def log_failure(log: Any, exc: BaseException, failed: str, meanwhile: str) -> None:
    """Log a failed database step from inside its ``except`` block. An outage is expected
    and retried, so it gets one warning line; anything else is a bug and gets its
    traceback."""
    if is_unavailable(exc):
        log.warning(f"database unavailable; {meanwhile}", error=str(exc))
    else:
        log.exception(failed)
