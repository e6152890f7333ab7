"""asyncpg's pool reports each failed attempt at reopening its connections with a
traceback. During a restart of a PostgreSQL the test owns, jobqueue's pool reports it
in one line ending with the error; the application's own asyncpg pool, beside it, as
asyncpg does."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from jobqueue import JobQueue
from jobqueue.config import Settings
from jobqueue.db.embedded import EmbeddedPostgres
from tests.conftest import free_port

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[EmbeddedPostgres, str]]:
    pg = EmbeddedPostgres(tmp_path / "pg", port=free_port())
    dsn = pg.start()
    try:
        yield pg, dsn
    finally:
        pg.stop()


@pytest.fixture
async def jq(server: tuple[EmbeddedPostgres, str]) -> AsyncIterator[JobQueue]:
    queue = JobQueue(settings=Settings(database_url=server[1], schema=f"t_{uuid.uuid4().hex[:12]}"))
    yield queue
    await queue.close()


class PoolRecords(logging.Handler):
    """asyncpg's pool records, each with the pool that logged it (the one whose task
    was running)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[object, logging.LogRecord]] = []

    def emit(self, record: logging.LogRecord) -> None:
        task = asyncio.current_task()
        frame = task.get_coro().cr_frame if task is not None else None  # type: ignore[union-attr]
        self.seen.append((frame.f_locals.get("self") if frame else None, record))

    def of(self, pool: object) -> list[logging.LogRecord]:
        return [record for logged_by, record in self.seen if logged_by is pool]


async def test_a_failed_reconnection_of_jobqueues_pool_is_one_line(
    server: tuple[EmbeddedPostgres, str], jq: JobQueue
) -> None:
    pg, dsn = server
    ours = await jq.pool()
    await ours.fetchval("SELECT 1")
    theirs = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    records = PoolRecords()
    pool_log = logging.getLogger("asyncpg.pool")
    pool_log.addHandler(records)
    try:
        await asyncio.to_thread(pg.stop)
        for pool in (ours, theirs):  # each notices its connection is gone, if not yet
            with contextlib.suppress(Exception):
                await pool.fetchval("SELECT 1")
        deadline = time.monotonic() + 30
        while not (records.of(ours) and records.of(theirs)):
            assert time.monotonic() < deadline, [r.getMessage() for _, r in records.seen]
            await asyncio.sleep(0.1)
        await asyncio.to_thread(pg.start)
        assert await ours.fetchval("SELECT 1") == 1
        assert await theirs.fetchval("SELECT 1") == 1
    finally:
        pool_log.removeHandler(records)
        await theirs.close()

    for record in records.of(ours):
        message = record.getMessage()
        assert record.exc_info is None, message
        # The error's one line ("the database system is shutting down", "Connect call
        # failed ..."), where asyncpg's record has its traceback.
        head, error = message.split("; retrying: ")
        assert head == "Failed to restore the pool connection floor", message
        assert error.strip()
        assert "\n" not in message
    # The application's own pool: asyncpg's record as it was, its traceback included.
    for record in records.of(theirs):
        assert record.exc_info is not None
        assert record.getMessage() == "Failed to restore the pool connection floor; retrying"
