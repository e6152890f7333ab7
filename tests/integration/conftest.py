"""Fixtures for tests against a real PostgreSQL in this process: a worker whose test
signals are armed, the NOTIFYs that announce new jobs, the HTTP API over ASGI."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import httpx
import pytest

from jobqueue.app import JobQueue
from jobqueue.db.sql import channel_name, new_jobs
from jobqueue.worker import Worker

StartWorker = Callable[..., Awaitable[Worker]]


@pytest.fixture
async def start_worker(jq: JobQueue) -> AsyncIterator[StartWorker]:
    """Start a worker in this process, ``jq``'s settings overridden by the keywords.
    Its signals are armed before it starts: a test can wait on what it does at once."""
    workers: list[Worker] = []

    async def start(**overrides: Any) -> Worker:
        settings = dataclasses.replace(jq.settings, **overrides)
        worker = Worker(await jq.pool(), jq.dsn, settings, jq.tasks, clock=jq.clock)
        worker.arm_signals()
        await worker.start()
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        await worker.stop(asyncio.Event())


class Notifications:
    """The NOTIFYs that announce new jobs on a schema's channel, as a LISTEN of our own
    receives them."""

    def __init__(self, conn: asyncpg.Connection, channel: str) -> None:
        self._conn = conn
        self._channel = channel
        self._received: asyncio.Queue[str] = asyncio.Queue()

    async def listen(self) -> None:
        await self._conn.add_listener(
            self._channel, lambda *args: self._received.put_nowait(args[-1])
        )

    async def so_far(self) -> list[str]:
        """The queues named by every NOTIFY sent before this call, not taken yet.

        It sends one of its own and waits for it: PostgreSQL delivers a channel's
        notifications in the order their transactions committed, so any sent before
        (an enqueue's, say) has arrived by then, and none is missed for want of waiting.
        """
        marker = f"marker-{uuid.uuid4().hex}"
        await self._conn.execute("SELECT pg_notify($1, $2)", self._channel, marker)
        payloads = []
        while (payload := await asyncio.wait_for(self._received.get(), 10)) != marker:
            payloads.append(new_jobs(payload)[0])
        return payloads


@pytest.fixture
async def notified(jq: JobQueue, pg_dsn: str) -> AsyncIterator[Notifications]:
    """The NOTIFYs that announce new jobs on this test's schema, from now on."""
    conn = await asyncpg.connect(pg_dsn)
    notifications = Notifications(conn, channel_name(jq.settings.schema))
    await notifications.listen()
    yield notifications
    await conn.close()


@pytest.fixture
async def api_client(jq: JobQueue) -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP API of ``jq`` in-process (no worker, any job type accepted). Behaviour
    that depends on a real server (signals, concurrency) uses ``spawn`` instead."""
    from jobqueue.api import create_app

    app = create_app(jq, check_types=False)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        yield client


def add_ok_and_bad_tasks(jq: JobQueue) -> None:
    """Two tasks: "ok" succeeds, "bad" fails on its only attempt."""

    @jq.task("ok")
    async def ok(payload: dict[str, Any]) -> None:
        pass

    @jq.task("bad", max_attempts=1)
    async def bad(payload: dict[str, Any]) -> None:
        raise RuntimeError("no")
