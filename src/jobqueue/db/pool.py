"""Connections: where the database is, how a connection is set up, which errors mean "down"."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import asyncpg

from jobqueue import logs
from jobqueue.db.embedded import EmbeddedPostgres, follow
from jobqueue.db.hosts import single_host_dsns
from jobqueue.model.errors import DatabaseUnavailable

T = TypeVar("T")
P = ParamSpec("P")

# Settings of every session. Keepalives: half-open TCP connections (a host that
# vanished without a FIN) are noticed by the server within about 30 s instead of the
# kernel's default two hours, so that it frees the backends (and locks) of clients
# that are gone.
SESSION_SETTINGS = {
    "tcp_keepalives_idle": "10",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
    # No JIT compilation: every query of ours runs in milliseconds, and JIT, which the
    # planner turns on for plans it rates expensive, compiles for tens of them. The
    # small queue tables are often never analysed, so their estimates are wild: under
    # a held transaction GET /queues took 29 ms with JIT, 0.8 ms without.
    "jit": "off",
    # No sequential scan where an index can serve. Every query of ours finds its rows
    # through an index, and a cached plan must stay right as the tables grow: a
    # generic plan (PostgreSQL caches one once a statement has run five times) made
    # while the jobs table was a few pages would otherwise keep the claim's and the
    # fenced writes' lookups sequential scans as a held xmin grows the table (5 ms,
    # 676 pages, per claim after a minute of one: a pickup p99 of 83 ms during a
    # 120 s hold). Planning every execution instead (plan_cache_mode =
    # force_custom_plan, which this replaces) cost every statement its planning, and
    # the plpgsql triggers' statements theirs: 80 us more server time per single
    # enqueue, and 0.3 ms per claim on an idle worker's pickup path. A table with no
    # index (the counter changes) is still scanned: it has no other path.
    "enable_seqscan": "off",
}

# asyncpg waits for a reply without a limit of its own. When the network drops
# packets (a pulled cable, a firewall, a NAT or proxy that lost the connection)
# no reply and no error ever come: the kernel retransmits for about 15 minutes, and
# a connection that only waits (LISTEN, an idle one in the pool) hangs for good.
# Each bound below turns that into an error that is retried like any outage.

# Longest a connection attempt (TCP, TLS, authentication) may take, per host of the
# DSN (db/hosts.py). Default 5 s (asyncpg's is 60 s): a healthy server takes
# milliseconds, a distant one well under a second; during an outage a doomed attempt
# is given up soon enough for the next one to succeed within seconds of the network's
# return, and a silent first host of several delays a connection by that much.
CONNECT_TIMEOUT = 5.0

# A pooled query is abandoned by the client this long after the server's own
# statement timeout would have cancelled it. Default 1 s: the server's answer
# (QueryCanceledError, the clean outcome) needs one round trip; the client only
# gives up when no answer can come at all. asyncpg then tries to cancel the query
# on a new connection for up to as long again, and the caller waits for that too:
# with nothing but this bound, an unreachable server costs a query up to
# 2 x (statement timeout + 1 s). Larger only delays that; smaller would cut queries
# the server is still allowed to finish.
REPLY_MARGIN = 1.0

# Client-side TCP options for every connection, for what the bounds above cannot
# see: a query the server is still working on, or a connection that only waits.
# Keepalive probes a silent connection after KEEPALIVE_IDLE s, every
# KEEPALIVE_INTERVAL s; TCP_USER_TIMEOUT drops a connection whose probes or data go
# unacknowledged for USER_TIMEOUT s (Linux; elsewhere after KEEPALIVE_COUNT probes).
# Defaults 10 s, 5 s, 3, 10 s: a dead link is noticed within about 10 s by a
# connection waiting for a reply and 15 s by an idle one (tests/test_network.py),
# for one tiny packet per 10 s per idle connection. A slow query is never cut: its
# bytes are acknowledged by the server's kernel, and so are the probes. Shorter
# notices sooner but may drop connections over a congested or lossy link.
KEEPALIVE_IDLE = 10
KEEPALIVE_INTERVAL = 5
KEEPALIVE_COUNT = 3
USER_TIMEOUT = 10.0


def set_tcp_options(conn: asyncpg.Connection) -> None:
    """Enable keepalive and the user timeout on ``conn``'s socket (not on a Unix socket)."""
    # asyncpg has no public way to reach its socket, nor to pass socket options.
    sock = conn._transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    options = {
        "TCP_KEEPIDLE": KEEPALIVE_IDLE,
        "TCP_KEEPINTVL": KEEPALIVE_INTERVAL,
        "TCP_KEEPCNT": KEEPALIVE_COUNT,
        "TCP_USER_TIMEOUT": int(USER_TIMEOUT * 1000),
    }
    for name, value in options.items():
        if hasattr(socket, name):  # not every platform has all of them
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def resolve_dsn(database_url: str | None, data_path: Path) -> tuple[str, EmbeddedPostgres | None]:
    """The DSN to use: ``database_url``, else the embedded server's in ``data_path``,
    started (or attached to)."""
    if database_url:
        return database_url, None
    server = EmbeddedPostgres(data_path)
    return server.start(), server


async def keep_session(conn: asyncpg.Connection) -> None:
    """Release a connection to the pool without the default reset query.

    asyncpg still rolls back an open transaction; the reset query (UNLISTEN, RESET
    ALL, advisory unlock) would only cost a round trip per query, and our pooled
    connections keep no such state: LISTEN has its own connection, and the
    migration lock is released before its connection returns.
    """


async def init_connection(conn: asyncpg.Connection) -> None:
    set_tcp_options(conn)


class Pool(asyncpg.Pool):  # type: ignore[misc]  # asyncpg has no type information
    """asyncpg's pool, whose queries are sent again on another connection when they
    provably never reached the server (see ``never_sent``): a backend terminated while
    its connection sat idle leaves that connection looking open for a moment, and the
    first query on it fails before anything is written. Nothing ran, so running it
    elsewhere is safe for any statement, and callers never see that race."""

    async def _maintain_min_size(self) -> None:
        # asyncpg's task that reopens the pool's minimum of connections, and logs each
        # failure with a traceback: marked as ours, for logs.OneLineReconnects. The
        # task runs in a copy of the context, so the mark stays in it.
        logs.reconnecting.set(True)
        await super()._maintain_min_size()

    async def execute(self, query: str, *args: Any, **options: Any) -> str:
        result: str = await self._resend_unsent("execute", query, args, options)
        return result

    async def fetch(self, query: str, *args: Any, **options: Any) -> list[Any]:
        result: list[Any] = await self._resend_unsent("fetch", query, args, options)
        return result

    async def fetchrow(self, query: str, *args: Any, **options: Any) -> Any:
        return await self._resend_unsent("fetchrow", query, args, options)

    async def fetchval(self, query: str, *args: Any, **options: Any) -> Any:
        return await self._resend_unsent("fetchval", query, args, options)

    async def _resend_unsent(
        self, method: str, query: str, args: tuple[Any, ...], options: dict[str, Any]
    ) -> Any:
        run = getattr(super(), method)  # asyncpg's, with its options (timeout, ...)
        return await resend_unsent(lambda: run(query, *args, **options), self)


class KeptConnection:
    """One pooled connection kept across uses, and given back to the pool once it has
    gone unused for KEEP_SECONDS.

    Taking a connection from asyncpg's pool and giving it back costs three turns of
    the event loop (the release runs as a task of its own, shielded), each an epoll
    call: on a single enqueue that was 40% of the client's CPU. Kept, a burst of
    enqueues pays for the pool once. A pool of one connection (a worker's) never keeps
    it: the others waiting for it come first.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._kept: asyncpg.Connection | None = None
        self._used = False  # since the timer was last set
        self._timer: asyncio.TimerHandle | None = None

    async def take(self) -> asyncpg.Connection:
        """The kept connection if there is one, else one of the pool's."""
        conn, self._kept = self._kept, None
        if conn is not None:
            if not conn.is_closed():
                return conn
            await self._pool.release(conn)  # the pool replaces a closed connection
        return await self._pool.acquire()

    async def give(self, conn: asyncpg.Connection, *, keep: bool = True) -> None:
        """Done with ``conn``: kept for the next use (``keep``), else given back now
        (after a failure, so that the pool decides what becomes of it)."""
        if not keep or self._kept is not None or self._pool.get_max_size() < 2:
            await self._pool.release(conn)
            return
        self._kept, self._used = conn, True
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(KEEP_SECONDS, self._expire)

    def _expire(self) -> None:
        """Give the kept connection back if it went unused since the timer was set."""
        self._timer = None
        if self._kept is None:
            return  # in use: the give that ends the use sets the timer again
        if self._used:
            self._used = False
            self._timer = asyncio.get_running_loop().call_later(KEEP_SECONDS, self._expire)
            return
        conn, self._kept = self._kept, None
        task = asyncio.ensure_future(self._pool.release(conn))
        _releasing.add(task)
        task.add_done_callback(_releasing.discard)

    async def close(self) -> None:
        """Give the kept connection back (before the pool closes, which waits for it)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        conn, self._kept = self._kept, None
        if conn is not None:
            await self._pool.release(conn)


# How long a KeptConnection keeps a connection nobody uses. Default 1 s: long enough
# for a caller's next enqueue, short enough that an idle process gives back what it
# does not use (the pool then closes it after max_inactive_connection_lifetime).
KEEP_SECONDS = 1.0

# Give-backs under way: the event loop keeps only weak references to tasks.
_releasing: set[asyncio.Future[None]] = set()


async def resend_unsent(run: Callable[[], Awaitable[T]], pool: asyncpg.Pool) -> T:
    """``run()``, run again while it fails before its statement was sent. Each failure
    closed the connection it was tried on, and every connection of the pool may have
    been killed at once: so up to once per connection, and once more on a new one."""
    for _ in range(pool.get_max_size()):
        try:
            return await run()
        except Exception as exc:
            if not never_sent(exc):
                raise
    return await run()


async def create_pool(
    dsn: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    statement_timeout: float = 30.0,
    pooler: bool = False,
) -> asyncpg.Pool:
    """``pooler``: ``dsn`` is PgBouncer in transaction mode, which hands each
    transaction to any server connection. So no named prepared statements (asyncpg's
    statement cache: each statement is then parsed on every execution, unnamed) and no
    settings sent at start-up (PgBouncer refuses the ones it does not know, and could
    not keep them per client): the session settings come from PgBouncer's
    ``connect_query`` or the role instead (docs/scaling.md)."""
    logs.quiet_reconnects()
    settings = {
        "application_name": "jobqueue",
        # Every query of the runtime takes milliseconds; one stuck behind a lock or
        # a sick server fails after this instead of holding a worker or a request.
        "statement_timeout": f"{int(statement_timeout * 1000)}ms",
        **SESSION_SETTINGS,
    }
    pool = Pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        connect=connect_each_host,
        reset=keep_session,
        init=init_connection,
        timeout=CONNECT_TIMEOUT,
        command_timeout=statement_timeout + REPLY_MARGIN,
        server_settings={"application_name": "jobqueue"} if pooler else settings,
        statement_cache_size=0 if pooler else 100,
        # What asyncpg.create_pool, which cannot make a subclass, passes by default.
        connection_class=asyncpg.Connection,
        record_class=asyncpg.Record,
        max_queries=50000,
        max_inactive_connection_lifetime=300.0,
        loop=None,
    )
    await pool
    return pool


async def connect(
    dsn: str,
    application_name: str = "jobqueue",
    *,
    command_timeout: float | None = None,
    pooler: bool = False,
) -> asyncpg.Connection:
    """A connection of its own. Without ``command_timeout`` a query may run as long as it
    takes (a migration); only a dead link, noticed by the TCP options, ends it.
    ``pooler``: ``dsn`` is PgBouncer in transaction mode (see create_pool)."""
    settings = {"application_name": application_name}
    conn = await connect_each_host(
        dsn,
        timeout=CONNECT_TIMEOUT,
        command_timeout=command_timeout,
        server_settings=settings if pooler else settings | SESSION_SETTINGS,
        statement_cache_size=0 if pooler else 100,
    )
    set_tcp_options(conn)
    return conn


async def connect_each_host(dsn: str, **options: Any) -> asyncpg.Connection:
    """``asyncpg.connect(dsn, **options)``, host by host when ``dsn`` lists several: the
    first that accepts (and suits its target_session_attrs) wins, each within its own
    ``timeout``. At once an error that is no outage (a refused password says the same
    on every host); else the last host's error, or a TimeoutError if a host took the
    whole timeout: a caller that retries only what failed fast then does not wait it
    out again at once (an enqueue answers 503 after one timeout, not four). The embedded
    server is looked for where it now listens (embedded.follow)."""
    *others, last = single_host_dsns(follow(dsn))
    timed_out: TimeoutError | None = None
    for one in others:
        try:
            return await asyncpg.connect(one, **options)
        except TimeoutError as exc:
            timed_out = exc
        except Exception as exc:
            if not is_unavailable(exc):
                raise
    try:
        conn: asyncpg.Connection = await asyncpg.connect(last, **options)
    except Exception as exc:
        if timed_out is not None and is_unavailable(exc):
            raise timed_out from exc
        raise
    return conn


async def connect_session(direct: str | None, dsn: str) -> asyncpg.Connection:
    """A connection of its own: to ``direct``, the direct session, if there is one,
    else to ``dsn`` through the pooler (poll-only, Settings.poll_only)."""
    return await connect(direct or dsn, pooler=direct is None)


# The error of a query on a connection whose backend was terminated while it sat idle:
# asyncpg read the server's FATAL message with no query in flight, took it for a
# protocol error and waits for a ReadyForQuery that never comes; until it reads the
# end of the stream, the connection looks open. The next query fails as it begins.
STALE_CONNECTION = "cannot switch to state"


def never_sent(exc: BaseException) -> bool:
    """True for an error raised before the statement was written to its connection: it
    never reached the server, so nothing of it ran. asyncpg checks that a connection is
    open, still ours and not busy before it sends anything, and says so with an
    InterfaceError (but a bad argument's is a ValueError too); a connection that dies
    once the statement is sent is a ConnectionDoesNotExistError instead."""
    if isinstance(exc, asyncpg.InternalClientError):
        return str(exc).startswith(STALE_CONNECTION)
    return isinstance(exc, asyncpg.InterfaceError) and not isinstance(exc, ValueError)


# The errors a web application answers 503 for (the HTTP API and the dashboard register
# a handler for each); the handler's is_unavailable then tells an outage from a bug.
UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    OSError,
    asyncpg.QueryCanceledError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.TooManyConnectionsError,
    # A query on a connection whose backend was just killed, when is_unavailable says so.
    asyncpg.InternalClientError,
)


def is_unavailable(exc: BaseException) -> bool:
    """True for errors that mean the database cannot be reached right now (retry later)."""
    unavailable: tuple[type[BaseException], ...] = (
        OSError,  # refused, reset, broken pipe, unreachable
        asyncpg.QueryCanceledError,  # statement_timeout: the server is too slow to answer
        TimeoutError,
        asyncpg.PostgresConnectionError,  # class 08, CannotConnectNow among them
        asyncpg.InterfaceError,  # connection closed, lost mid-operation or released
        asyncpg.CannotConnectNowError,  # starting up or shutting down
        asyncpg.AdminShutdownError,  # 57P01: pg_terminate_backend, a fast shutdown
        asyncpg.CrashShutdownError,
        asyncpg.TooManyConnectionsError,
        # No host of the DSN suits its target_session_attrs: during a failover, the
        # old primary gone (or read-only) and no standby promoted yet.
        asyncpg.TargetServerAttributeNotMatched,
    )
    if pooler_refusal(exc) is not None:
        return False  # waiting would not help
    return isinstance(exc, unavailable) or never_sent(exc)


def unavailable_error(exc: Exception) -> DatabaseUnavailable | None:
    """What the Python API raises for ``exc``: a DatabaseUnavailable (to raise from
    ``exc``) when ``exc`` means the database cannot be reached, else None (``exc`` as
    it is: a bug, a bad value, or already the API's own error). A value the driver
    cannot encode is an InterfaceError too, but no outage."""
    if isinstance(exc, DatabaseUnavailable | ValueError) or not is_unavailable(exc):
        return None
    return DatabaseUnavailable(f"database unavailable: {error_text(exc)}")


def raises_unavailable(
    call: Callable[P, Awaitable[T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """``call`` (a coroutine function of the Python API) raising DatabaseUnavailable
    instead of the driver's errors of an outage (``unavailable_error``). Not for the
    enqueue calls, which say what was stored (jobqueue.model.errors, jobqueue.enqueue.enqueuer)."""

    @functools.wraps(call)
    async def translated(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await call(*args, **kwargs)
        except Exception as exc:
            error = unavailable_error(exc)
            if error is None:
                raise
            raise error from exc

    return translated


@contextlib.contextmanager
def unavailable_raised() -> Iterator[None]:
    """``raises_unavailable`` for a part of a call: where the rest may raise errors that
    must stay as they are (``jq.wait``'s TimeoutError, a ``jq.worker()`` block's own)."""
    try:
        yield
    except Exception as exc:
        error = unavailable_error(exc)
        if error is None:
            raise
        raise error from exc


def pooler_refusal(exc: BaseException) -> str | None:
    """What to do when ``exc`` is PgBouncer refusing the session settings a direct
    connection sends (it is then no outage, and retrying cannot help), else None."""
    if isinstance(exc, asyncpg.ProtocolViolationError) and "unsupported startup parameter" in str(
        exc
    ):
        return (
            f"the database refused a session setting ({exc}): DATABASE_URL looks like "
            "PgBouncer; set JOBQUEUE_DIRECT_DATABASE_URL to the database itself "
            "(docs/scaling.md)"
        )
    return None


def error_text(exc: BaseException) -> str:
    """The error for a log line; a timeout's message is empty, so then its type."""
    return str(exc) or type(exc).__name__


def log_failure(log: Any, exc: BaseException, failed: str, meanwhile: str) -> None:
    """Log a failed database step from inside its ``except`` block. An outage is expected
    and retried, so it gets one warning line; anything else is a bug and gets its
    traceback."""
    if is_unavailable(exc):
        log.warning(f"database unavailable; {meanwhile}", error=error_text(exc))
    else:
        log.exception(failed)
