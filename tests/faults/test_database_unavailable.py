"""A PostgreSQL the test owns, stopped and started again under an application's
JobQueue: every call of the Python API raises jobqueue.DatabaseUnavailable while it is
down (never a driver's error), and works again once it is back."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from jobqueue import DatabaseUnavailable, EnqueueError, EnqueueFailed, JobQueue, JobStatus
from jobqueue.config import Settings
from jobqueue.db.embedded import EmbeddedPostgres
from tests.conftest import free_port

pytestmark = pytest.mark.anyio


@dataclass
class Server:
    pg: EmbeddedPostgres
    dsn: str

    async def stop(self) -> None:
        await asyncio.to_thread(self.pg.stop)

    async def start(self) -> None:
        await asyncio.to_thread(self.pg.start)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    pg = EmbeddedPostgres(tmp_path / "pg", port=free_port())
    dsn = pg.start()
    try:
        yield Server(pg, dsn)
    finally:
        pg.stop()


@pytest.fixture
async def outage_jq(server: Server) -> AsyncIterator[JobQueue]:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    jq = JobQueue(settings=Settings(database_url=server.dsn, schema=schema))

    @jq.task("noop")
    async def noop(payload: dict[str, Any]) -> None:
        pass

    await jq.migrate()
    yield jq
    await jq.close()


# Every call of the API that reads or changes what is stored, on job ``j``.
CALLS: dict[str, Callable[[JobQueue, int], Awaitable[Any]]] = {
    "ping": lambda jq, j: jq.ping(),
    "migrate": lambda jq, j: jq.migrate(),
    "get": lambda jq, j: jq.get(j),
    "wait": lambda jq, j: jq.wait(j, timeout=30),
    "list": lambda jq, j: jq.list(),
    "attempts": lambda jq, j: jq.attempts(j),
    "workers": lambda jq, j: jq.workers(),
    "queues": lambda jq, j: jq.queues(),
    "queue": lambda jq, j: jq.queue("default"),
    "pause": lambda jq, j: jq.pause("other"),
    "resume": lambda jq, j: jq.resume("other"),
    "set_limits": lambda jq, j: jq.set_limits("other", global_limit=2),
    "cancel": lambda jq, j: jq.cancel(j),
    "retry": lambda jq, j: jq.retry(j),
    "cancel_many": lambda jq, j: jq.cancel_many(queue="other"),
    "retry_many": lambda jq, j: jq.retry_many(queue="other"),
    "get_workflow": lambda jq, j: jq.get_workflow(1),
    "cancel_workflow": lambda jq, j: jq.cancel_workflow(1),
    "get_sync": lambda jq, j: asyncio.to_thread(jq.get_sync, j),
    "enqueue": lambda jq, j: jq.enqueue("noop"),
    "enqueue_many": lambda jq, j: jq.enqueue_many("noop", [{}]),
    "worker": lambda jq, j: run_worker(jq),
}


async def run_worker(jq: JobQueue) -> None:
    async with jq.worker():
        pass


def assert_unavailable(name: str, exc: BaseException) -> None:
    assert isinstance(exc, DatabaseUnavailable), f"{name}: {exc!r}"
    # The driver's (or the network's) error, as the cause, and nothing of ours.
    assert exc.cause is exc.__cause__, name
    assert isinstance(exc.cause, OSError | asyncpg.PostgresError | asyncpg.InterfaceError), name
    assert not isinstance(exc.cause, DatabaseUnavailable), name
    assert str(exc).endswith(str(exc.cause) or type(exc.cause).__name__), name


async def test_every_call_raises_database_unavailable_while_down_and_works_after(
    server: Server, outage_jq: JobQueue
) -> None:
    jq = outage_jq
    job = await jq.enqueue("noop", queue="parked")
    await server.stop()
    try:
        for name, call in CALLS.items():
            with pytest.raises(DatabaseUnavailable) as raised:
                await call(jq, job.id)
            assert_unavailable(name, raised.value)
        # Enqueue's errors say what was stored, as before, and are DatabaseUnavailable.
        with pytest.raises(EnqueueFailed) as failed:
            await jq.enqueue("noop")
        assert isinstance(failed.value, EnqueueError)
        assert failed.value.stored is False
    finally:
        await server.start()

    for name, call in CALLS.items():
        if name in ("wait", "worker"):
            continue  # the job is pending: waited for below, by a worker that runs it
        await call(jq, job.id)
    # Cancelled, then retried: pending again.
    assert (await jq.get(job.id)).status == JobStatus.PENDING  # type: ignore[union-attr]
    async with jq.worker(queues=["parked"]):
        done = await jq.wait(job.id, timeout=30)
    assert done.status == JobStatus.COMPLETED


async def test_a_jobqueue_first_used_during_an_outage_raises_database_unavailable(
    server: Server,
) -> None:
    await server.stop()
    jq = JobQueue(settings=Settings(database_url=server.dsn, schema="never_made"))
    try:
        for name in ("get", "queues", "wait", "worker"):
            with pytest.raises(DatabaseUnavailable) as raised:
                await CALLS[name](jq, 1)
            assert_unavailable(name, raised.value)
        with pytest.raises(DatabaseUnavailable):
            async with jq:
                pass
    finally:
        await jq.close()
        await server.start()


async def test_a_wait_that_times_out_still_raises_timeout_error(outage_jq: JobQueue) -> None:
    job = await outage_jq.enqueue("noop", queue="parked")
    with pytest.raises(TimeoutError) as raised:
        await outage_jq.wait(job.id, timeout=0.2)
    assert not isinstance(raised.value, DatabaseUnavailable)
