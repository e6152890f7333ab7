"""Enqueue's error contract when the database cannot be reached: the caller gets its
job, or EnqueueFailed (nothing stored), or EnqueueOutcomeUnknown (the connection died
once the INSERT was sent: maybe stored); over HTTP, a 503 that says which. Never a
driver's error, and an INSERT of unknown fate is never sent again."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import httpx
import pytest

from jobqueue import EnqueueError, EnqueueFailed, EnqueueOutcomeUnknown
from jobqueue.api import create_app
from jobqueue.app import JobQueue
from jobqueue.config import Settings
from tests.conftest import free_port

pytestmark = pytest.mark.anyio


async def count_jobs(db: asyncpg.Connection, schema: str) -> int:
    n: int = await db.fetchval(f'SELECT count(*) FROM "{schema}".jobs')
    return n


@contextlib.asynccontextmanager
async def inserts_blocked(db: asyncpg.Connection, schema: str) -> AsyncIterator[None]:
    """Every INSERT into the schema's jobs waits until the block ends."""
    async with db.transaction():
        await db.execute(f'LOCK TABLE "{schema}".jobs IN SHARE MODE')
        yield


async def kill_blocked_insert(
    db: asyncpg.Connection, schema: str, enqueue: asyncio.Task[Any]
) -> None:
    """Terminate the backend of jobqueue's INSERT that waits for our lock (only ours:
    no other test's backend), or of the call of the function that inserts under a
    unique key (migration 0016). Its INSERT may wait while it is being parsed, when
    pg_stat_activity still shows the statement before it (a BEGIN)."""
    deadline = time.monotonic() + 30
    while True:
        # `db` holds the lock in a transaction, and a transaction reads pg_stat_activity
        # once: without this, a first look taken before the INSERT blocked is all it sees.
        await db.execute("SELECT pg_stat_clear_snapshot()")
        killed = await db.fetchval(
            """SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
               WHERE application_name = 'jobqueue' AND wait_event_type = 'Lock'
                 AND pg_backend_pid() = ANY(pg_blocking_pids(pid))"""
        )
        if killed:
            return
        if time.monotonic() > deadline or enqueue.done():
            backends = await db.fetch(
                """SELECT state, wait_event_type, wait_event, left(query, 80) AS query
                   FROM pg_stat_activity WHERE application_name = 'jobqueue'"""
            )
            ended = enqueue.exception() if enqueue.done() else "still waiting"
            raise AssertionError(f"no blocked INSERT found; enqueue: {ended!r}; {backends}")
        await asyncio.sleep(0.01)


ENQUEUES: dict[str, Callable[[JobQueue], Awaitable[Any]]] = {
    "enqueue": lambda jq: jq.enqueue("ok", {}),
    "enqueue_many": lambda jq: jq.enqueue_many("ok", [{}, {}]),
    "unique_key": lambda jq: jq.enqueue("ok", {}, unique_key="k"),
}


@pytest.mark.parametrize("call", ENQUEUES)
async def test_a_backend_killed_during_the_insert_is_an_unknown_outcome_never_resent(
    jq: JobQueue, db: asyncpg.Connection, schema: str, call: str
) -> None:
    async with inserts_blocked(db, schema):
        enqueue = asyncio.create_task(ENQUEUES[call](jq))
        await kill_blocked_insert(db, schema, enqueue)
        with pytest.raises(EnqueueOutcomeUnknown) as raised:
            await enqueue
    assert raised.value.stored == "unknown"
    assert isinstance(raised.value, EnqueueError | ConnectionError)
    assert "unique_key" in str(raised.value)  # the way out
    # Killed before it committed: not stored, and not sent again by jobqueue.
    assert await count_jobs(db, schema) == 0
    await ENQUEUES[call](jq)  # the pool recovers at once
    assert await count_jobs(db, schema) == (2 if call == "enqueue_many" else 1)


async def test_the_connection_kept_between_enqueues_killed_while_idle_is_no_error(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    """The enqueuer keeps its connection between calls (db/pool.py KeptConnection): one
    whose backend was terminated meanwhile fails before sending, and the next enqueue
    goes out on another connection, stored once."""
    await jq.enqueue("ok", {})
    killed = await db.fetchval(
        """SELECT array_agg(pid) FROM pg_stat_activity
           WHERE application_name = 'jobqueue' AND datname = current_database()
             AND pid <> pg_backend_pid() AND query LIKE '%' || $1 || '%'
             AND pg_terminate_backend(pid)""",
        f'"{schema}".jobs',
    )
    assert killed
    deadline = time.monotonic() + 10
    # Gone: each said so on its connection first, as a backend killed while idle does.
    while await db.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)", killed):
        assert time.monotonic() < deadline, killed
        await asyncio.sleep(0.01)
    job = await jq.enqueue("ok", {"n": 2})
    assert job.payload == {"n": 2}
    assert await count_jobs(db, schema) == 2


async def test_an_idempotent_retry_after_an_unknown_outcome_stores_the_job_once(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    async with inserts_blocked(db, schema):
        first = asyncio.create_task(jq.enqueue("ok", {"n": 1}, unique_key="order-7"))
        await kill_blocked_insert(db, schema, first)
        with pytest.raises(EnqueueOutcomeUnknown):
            await first
    job = await jq.enqueue("ok", {"n": 1}, unique_key="order-7")
    again = await jq.enqueue("ok", {"n": 1}, unique_key="order-7")
    assert again.id == job.id
    assert await count_jobs(db, schema) == 1


async def test_concurrent_callers_each_get_their_own_outcome(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    """Calls merged into shared INSERTs: those whose INSERT was killed hear so, the
    others get their jobs; none gets a job that is not stored."""
    async with inserts_blocked(db, schema):
        calls = [asyncio.create_task(jq.enqueue("ok", {"n": n})) for n in range(20)]
        await kill_blocked_insert(db, schema, calls[0])
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    jobs = [o for o in outcomes if not isinstance(o, BaseException)]
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert errors  # the killed INSERT's callers
    assert all(isinstance(e, EnqueueOutcomeUnknown) for e in errors), errors
    stored = await db.fetch(f'SELECT id FROM "{schema}".jobs')
    assert {r["id"] for r in stored} == {j.id for j in jobs}


class Proxy:
    """A TCP relay to PostgreSQL that can be shut: then nothing can connect."""

    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self._target = target_port
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)

    async def shut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        await self._server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


@pytest.fixture
async def unreachable(settings: Settings) -> AsyncIterator[JobQueue]:
    """A JobQueue whose pool was open, then lost the database: no connection can be had."""
    assert settings.database_url is not None
    target = int(settings.database_url.rsplit(":", 1)[1].split("/")[0])
    proxy = Proxy(target)
    await proxy.start()
    via = settings.database_url.replace(f":{target}/", f":{proxy.port}/")
    jq = JobQueue(settings=dataclasses.replace(settings, database_url=via))
    await jq.ping()
    await proxy.shut()
    deadline = time.monotonic() + 10
    while True:  # until the pool has seen its connection go
        try:
            await jq.ping()
        except OSError:  # refused: the pool is trying to connect again
            break
        except asyncpg.PostgresConnectionError:
            pass  # its connection was found dead as it was used
        assert time.monotonic() < deadline, "the pool still answers"
        await asyncio.sleep(0.01)
    yield jq
    await jq.close_pool(terminate=True)


@pytest.mark.parametrize("call", ENQUEUES)
async def test_a_pool_that_cannot_connect_is_enqueue_failed_and_nothing_stored(
    unreachable: JobQueue, db: asyncpg.Connection, schema: str, call: str
) -> None:
    with pytest.raises(EnqueueFailed) as raised:
        await ENQUEUES[call](unreachable)
    assert raised.value.stored is False
    assert isinstance(raised.value.__cause__, OSError)
    assert await count_jobs(db, schema) == 0


async def test_a_database_never_reached_is_enqueue_failed(settings: Settings) -> None:
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    async with contextlib.AsyncExitStack() as stack:
        jq = JobQueue(settings=dataclasses.replace(settings, database_url=nowhere))
        stack.push_async_callback(jq.close)
        with pytest.raises(EnqueueFailed):
            await jq.enqueue("ok", {})
        with pytest.raises(EnqueueFailed):
            await jq.enqueue_many("ok", [{}])


async def test_http_503_says_nothing_was_stored(
    unreachable: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    app = create_app(unreachable, check_types=False)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        for path, body in (("/jobs", {"type": "ok"}), ("/jobs/batch", {"jobs": [{"type": "ok"}]})):
            r = await client.post(path, json=body)
            assert r.status_code == 503, r.text
            assert r.json() == {
                "detail": "database unavailable; nothing stored, retry later",
                "stored": False,
            }
            assert r.headers["Retry-After"] == "1"
    assert await count_jobs(db, schema) == 0


async def test_http_503_with_an_idempotency_key_knows_the_transaction_stored_nothing(
    api_client: httpx.AsyncClient, db: asyncpg.Connection, schema: str
) -> None:
    """The key, the job and their binding are one transaction: a connection lost before
    its COMMIT stored none of them, and the same key is free for the retry."""
    headers = {"Idempotency-Key": "order-9"}
    async with inserts_blocked(db, schema):
        post = asyncio.create_task(api_client.post("/jobs", json={"type": "ok"}, headers=headers))
        await kill_blocked_insert(db, schema, post)
        r = await post
    assert r.status_code == 503, r.text
    assert r.json()["stored"] is False
    assert await count_jobs(db, schema) == 0
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".idempotency_keys') == 0
    again = await api_client.post("/jobs", json={"type": "ok"}, headers=headers)
    assert again.status_code == 201, again.text
    assert (await api_client.post("/jobs", json={"type": "ok"}, headers=headers)).status_code == 200
    assert await count_jobs(db, schema) == 1
