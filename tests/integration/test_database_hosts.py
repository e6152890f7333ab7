"""A DATABASE_URL that lists several hosts: every connection jobqueue makes (the pool's,
LISTEN's, the migration's) goes to the first host that answers and suits the DSN's
target_session_attrs, each host given its own connect timeout; and an application's
psycopg connection takes the same DSN."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import asyncpg
import psycopg
import pytest

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.db import pool
from jobqueue.db.pool import connect, create_pool, is_unavailable
from jobqueue.model.job import JobStatus
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio


@pytest.fixture
def silent_host() -> Iterator[str]:
    """An address that accepts TCP connections and never says a word, as a server
    that hangs (or a host whose replies are lost) does."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)  # never accepted: the kernel completes the handshake, nothing more
        yield f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def closed_host() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"  # refused once the socket is closed


def listing(pg_dsn: str, *first: str, attrs: str = "read-write", own: bool = True) -> str:
    """``pg_dsn`` with the hosts ``first`` listed before its own (or instead: ``own``)."""
    parts = urlsplit(pg_dsn)
    credentials, at, host = parts.netloc.rpartition("@")
    hosts = ",".join([*first, host] if own else first)
    netloc = f"{credentials}{at}{hosts}"
    return parts._replace(netloc=netloc, query=f"target_session_attrs={attrs}").geturl()


async def test_a_silent_first_host_costs_its_own_timeout_not_the_connection(
    pg_dsn: str, silent_host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Short, so that the test does not wait 5 s per connection on the silent host.
    monkeypatch.setattr(pool, "CONNECT_TIMEOUT", 0.5)
    dsn = listing(pg_dsn, silent_host)
    conn = await connect(dsn)
    try:
        assert await conn.fetchval("SELECT 1") == 1
    finally:
        await conn.close()
    opened = await create_pool(dsn, min_size=2, max_size=2)
    try:
        assert await opened.fetchval("SELECT 1") == 1
    finally:
        await opened.close()


@pytest.fixture
def settings(pg_dsn: str, schema: str, closed_host: str) -> Settings:
    """The jq fixture's settings, with a host that refuses listed first."""
    return Settings(database_url=listing(pg_dsn, closed_host), schema=schema, poll_interval=30)


async def test_the_queue_works_on_the_host_that_answers(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    ran: list[int] = []

    @jq.task("note")
    async def note(payload: dict[str, int]) -> None:
        ran.append(payload["n"])

    assert await jq.migrate() == []  # the schema fixture migrated it, on that host
    worker = await start_worker()
    await asyncio.wait_for(worker.listener.listening.wait(), 10)
    # Woken by NOTIFY (the poll is 30 s away), and the wait's own LISTEN told of the end.
    job = await jq.enqueue("note", {"n": 7})
    assert (await jq.wait(job.id, timeout=10)).status == JobStatus.COMPLETED
    assert ran == [7]


async def test_a_silent_host_among_unreachable_ones_is_reported_as_a_timeout(
    pg_dsn: str, silent_host: str, closed_host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An enqueue retries a connection that failed fast, but not one that timed out:
    one that waited on the silent host says so, whatever the later hosts said."""
    monkeypatch.setattr(pool, "CONNECT_TIMEOUT", 0.5)
    with pytest.raises(TimeoutError):
        await connect(listing(pg_dsn, silent_host, closed_host, own=False))


async def test_no_host_that_accepts_writes_is_an_outage(pg_dsn: str, closed_host: str) -> None:
    """What a client sees between the primary's loss and a standby's promotion, when
    the hosts that answer are standbys: an outage to wait out, not a bug."""
    with pytest.raises(asyncpg.TargetServerAttributeNotMatched) as raised:
        await connect(listing(pg_dsn, closed_host, attrs="standby"))
    assert is_unavailable(raised.value)


def test_a_psycopg_connection_of_the_application_takes_the_same_dsn(
    pg_dsn: str, schema: str, closed_host: str
) -> None:
    dsn = listing(pg_dsn, closed_host)
    jq = JobQueue(settings=Settings(database_url=dsn, schema=schema))
    try:
        with psycopg.connect(dsn) as conn:
            job = jq.enqueue_sync("noop", conn=conn)
        assert jq.get_sync(job.id) is not None
    finally:
        jq.close_sync()
