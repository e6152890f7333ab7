"""The application's own connections as Executors, so that the store's queries run
inside the application's transaction (``enqueue(conn=...)``).

Async: an asyncpg connection (as it is), a psycopg 3 AsyncConnection, or a
SQLAlchemy AsyncSession over either driver. Sync: a psycopg 3 Connection, a
SQLAlchemy Session over one, or Django's ``django.db.connection`` (psycopg 3
backend). A sync connection's Executor has async methods that block and never
suspend, so the same store methods (and the same unique-insert logic) run on it
through ``run_blocking``, in the caller's thread, with no event loop.

psycopg and SQLAlchemy are recognised by module name, so that only applications
that use them import them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar, Union

import asyncpg

from jobqueue.db.query_base import Executor

if TYPE_CHECKING:
    import psycopg
    from sqlalchemy.ext.asyncio import AsyncSession

# A connection of the application's, inside its transaction, for enqueue(conn=...).
AppConnection = Union[asyncpg.Connection, "psycopg.AsyncConnection[Any]", "AsyncSession"]

T = TypeVar("T")


def executor_for(conn: Any) -> Executor:
    """An Executor on an async connection of the application's."""
    if _module_of(conn, "sqlalchemy"):
        return _SQLAlchemySession(conn)
    if _module_of(conn, "psycopg"):
        return _PsycopgAsync(conn)
    return conn  # type: ignore[no-any-return]  # asyncpg's Connection is an Executor


def sync_executor_for(conn: Any) -> Executor:
    """An Executor, for ``run_blocking``, on a sync connection of the application's."""
    if _module_of(conn, "sqlalchemy"):
        conn = conn.connection().connection.driver_connection
    elif _module_of(conn, "django"):
        conn.ensure_connection()
        conn = conn.connection
    if not _module_of(conn, "psycopg"):
        raise TypeError(
            f"enqueue_sync(conn=...) takes a psycopg 3 connection, a SQLAlchemy Session "
            f"over one or django.db.connection, got {conn!r}"
        )
    return _PsycopgSync(conn)


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end in this thread. It must never suspend: every await in it
    reaches a sync Executor's call, which blocks instead."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a query on a sync connection suspended; it needs an event loop")


@functools.cache
def for_psycopg(sql: str) -> tuple[str, tuple[int, ...]]:
    """A query of ours for psycopg: ``$n`` placeholders become ``%s``, in the order they
    appear, and the second value says which argument goes where (0-based)."""
    # Comments first: psycopg would count the "$n" they mention as placeholders too.
    # (Our queries keep "--" out of their string literals.)
    sql = _COMMENT.sub("", sql)
    order = tuple(int(n) - 1 for n in _PARAM.findall(sql))
    return _PARAM.sub("%s", sql.replace("%", "%%")), order


_PARAM = re.compile(r"\$(\d+)")
_COMMENT = re.compile(r"--[^\n]*")


def _module_of(conn: Any, package: str) -> bool:
    return type(conn).__module__.startswith(package)


def _bind(sql: str, args: tuple[Any, ...]) -> tuple[str, list[Any]]:
    text, order = for_psycopg(sql)
    return text, [args[i] for i in order]


def _jsonb_as_text(cursor: Any) -> None:
    """Rows as asyncpg gives them: json and jsonb as their text, which the store's
    readers decode. psycopg would decode them itself, and a reader could not tell its
    value from text to decode: a result that is the JSON string "123" would be read
    again as 123. A cursor's loaders are its own; the application's are untouched."""
    from psycopg.types.string import TextLoader

    cursor.adapters.register_loader("json", TextLoader)
    cursor.adapters.register_loader("jsonb", TextLoader)


class _Rows:
    """fetchrow and fetchval from a fetch of dict rows."""

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        raise NotImplementedError

    async def fetchrow(self, query: str, *args: Any) -> Any:
        rows = await self.fetch(query, *args)
        return rows[0] if rows else None

    async def fetchval(self, query: str, *args: Any) -> Any:
        row = await self.fetchrow(query, *args)
        return None if row is None else next(iter(row.values()))


class _PsycopgAsync(_Rows):
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        from psycopg.rows import dict_row

        text, values = _bind(query, args)
        async with self._conn.cursor(row_factory=dict_row) as cursor:
            _jsonb_as_text(cursor)
            await cursor.execute(text, values)
            rows: list[Any] = await cursor.fetchall()
            return rows

    async def execute(self, query: str, *args: Any) -> str:
        text, values = _bind(query, args)
        async with self._conn.cursor() as cursor:
            await cursor.execute(text, values)
            return str(cursor.statusmessage)


class _PsycopgSync(_Rows):
    """Async in name only: each call blocks in the caller's thread (see run_blocking)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        from psycopg.rows import dict_row

        text, values = _bind(query, args)
        with self._conn.cursor(row_factory=dict_row) as cursor:
            _jsonb_as_text(cursor)
            cursor.execute(text, values)
            rows: list[Any] = cursor.fetchall()
            return rows

    async def execute(self, query: str, *args: Any) -> str:
        text, values = _bind(query, args)
        with self._conn.cursor() as cursor:
            cursor.execute(text, values)
            return str(cursor.statusmessage)


class _SQLAlchemySession:
    """The session's own connection, inside its transaction."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._driver: Executor | None = None

    async def _executor(self) -> Executor:
        if self._driver is None:
            session_conn = await self._session.connection()
            # SQLAlchemy's asyncpg adapter sends BEGIN with its first statement, not
            # before: without one of its own, our INSERT would run (and commit) outside it.
            await session_conn.exec_driver_sql("SELECT 1")
            raw = (await session_conn.get_raw_connection()).driver_connection
            self._driver = executor_for(raw)
        return self._driver

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        return await (await self._executor()).fetch(query, *args)

    async def fetchrow(self, query: str, *args: Any) -> Any:
        return await (await self._executor()).fetchrow(query, *args)

    async def fetchval(self, query: str, *args: Any) -> Any:
        return await (await self._executor()).fetchval(query, *args)

    async def execute(self, query: str, *args: Any) -> str:
        return await (await self._executor()).execute(query, *args)
