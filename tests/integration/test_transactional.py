"""enqueue(conn=...) on the application's own psycopg 3 connection: the job exists exactly
when the application's transaction commits, and workers are woken at commit."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import asyncpg
import psycopg
import pytest

from jobqueue.app import JobQueue
from jobqueue.context import JobContext
from jobqueue.model.job import Job, JobStatus
from tests.integration.conftest import Notifications, StartWorker

T = TypeVar("T")

pytestmark = pytest.mark.anyio


async def count(db: asyncpg.Connection, schema: str) -> int:
    n: int = await db.fetchval(f'SELECT count(*) FROM "{schema}".jobs')
    return n


async def test_async_psycopg_commit_stores_and_notifies_rollback_leaves_nothing(
    jq: JobQueue, db: asyncpg.Connection, schema: str, pg_dsn: str, notified: Notifications
) -> None:
    async with await psycopg.AsyncConnection.connect(pg_dsn) as app:
        async with app.transaction():
            job = await jq.enqueue("send_email", {"to": "a@example.com"}, conn=app)
            assert job.payload == {"to": "a@example.com"}
            assert await count(db, schema) == 0  # not visible before the commit
            assert await notified.so_far() == []
        assert await notified.so_far() == ["default"]  # woken at commit
        assert (await jq.get(job.id)) == job

        async def enqueue_then_fail() -> None:
            async with app.transaction():
                await jq.enqueue("send_email", {"to": "b@example.com"}, conn=app)
                raise RuntimeError("rolled back")

        with pytest.raises(RuntimeError, match="rolled back"):
            await enqueue_then_fail()
    assert await count(db, schema) == 1


async def test_sync_psycopg_connection_from_enqueue_sync(
    jq: JobQueue, db: asyncpg.Connection, schema: str, pg_dsn: str
) -> None:
    def app_code() -> int:
        with psycopg.connect(pg_dsn) as app:
            with app.transaction():
                job = jq.enqueue_sync("report", {"day": 1}, delay_seconds=0.8, conn=app)
            try:
                with app.transaction():
                    jq.enqueue_sync("report", {"day": 2}, conn=app)
                    raise ValueError("rolled back")
            except ValueError:
                pass
            return job.id

    job_id = await asyncio.to_thread(app_code)
    stored = await jq.get(job_id)
    assert stored is not None
    assert stored.payload == {"day": 1}
    assert (stored.run_at - stored.created_at).total_seconds() == pytest.approx(0.8)
    assert await count(db, schema) == 1


async def test_a_unique_job_on_the_applications_connection(
    jq: JobQueue, db: asyncpg.Connection, schema: str, pg_dsn: str
) -> None:
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as app:
        first = await jq.enqueue("x", unique_key="k", conn=app)
        again = await jq.enqueue("x", unique_key="k", conn=app)
    assert first.id == again.id
    assert await count(db, schema) == 1


def sqlalchemy_url(pg_dsn: str, driver: str) -> str:
    return pg_dsn.replace("postgresql://", f"postgresql+{driver}://", 1)


@pytest.mark.parametrize("driver", ["asyncpg", "psycopg"])
async def test_sqlalchemy_async_session_commit_and_rollback(
    jq: JobQueue, db: asyncpg.Connection, schema: str, pg_dsn: str, driver: str
) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    engine = create_async_engine(sqlalchemy_url(pg_dsn, driver))
    try:
        async with AsyncSession(engine) as session:
            async with session.begin():
                await session.execute(text("SELECT 1"))  # the application's own work
                job = await jq.enqueue("send_email", {"to": "a@example.com"}, conn=session)
                assert await count(db, schema) == 0
            assert await jq.get(job.id) == job
            await session.begin()
            await jq.enqueue("send_email", {"to": "b@example.com"}, conn=session)
            await session.rollback()
    finally:
        await engine.dispose()
    assert await count(db, schema) == 1


async def test_sqlalchemy_sync_session_from_enqueue_sync(
    jq: JobQueue, db: asyncpg.Connection, schema: str, pg_dsn: str
) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    def app_code() -> int:
        engine = create_engine(sqlalchemy_url(pg_dsn, "psycopg"))
        try:
            with Session(engine) as session:
                with session.begin():
                    job = jq.enqueue_sync("report", {"day": 1}, conn=session)
                session.begin()
                jq.enqueue_sync("report", {"day": 2}, conn=session)
                session.rollback()
            return job.id
        finally:
            engine.dispose()

    job_id = await asyncio.to_thread(app_code)
    assert (await jq.get(job_id)).payload == {"day": 1}  # type: ignore[union-attr]
    assert await count(db, schema) == 1


# Every connection an application may hold, as (open, enqueue, end) steps. Sync ones run
# in one thread of their own: Django's connection belongs to the thread that opened it.
APP_THREAD = concurrent.futures.ThreadPoolExecutor(max_workers=1)


async def in_app_thread(fn: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(APP_THREAD, fn)


class AppTransaction:
    """One transaction on the application's connection of a given kind."""

    def __init__(self, kind: str, dsn: str) -> None:
        self.kind, self.dsn = kind, dsn
        self.handle: Any = None

    async def enqueue(self, jq: JobQueue) -> Job:
        kind, dsn = self.kind, self.dsn
        if kind == "asyncpg":
            self.handle = await asyncpg.connect(dsn)
            self.tx = self.handle.transaction()
            await self.tx.start()
            return await jq.enqueue("wake", conn=self.handle)
        if kind == "psycopg-async":
            self.handle = await psycopg.AsyncConnection.connect(dsn)
            return await jq.enqueue("wake", conn=self.handle)
        if kind.startswith("sqlalchemy-async"):
            from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

            self.engine = create_async_engine(sqlalchemy_url(dsn, kind.rsplit("-", 1)[1]))
            self.handle = AsyncSession(self.engine)
            return await jq.enqueue("wake", conn=self.handle)
        return await in_app_thread(lambda: self._enqueue_sync(jq))

    def _enqueue_sync(self, jq: JobQueue) -> Job:
        if self.kind == "psycopg-sync":
            self.handle = psycopg.connect(self.dsn)
        elif self.kind == "sqlalchemy-sync":
            from sqlalchemy import create_engine
            from sqlalchemy.orm import Session

            self.engine = create_engine(sqlalchemy_url(self.dsn, "psycopg"))
            self.handle = Session(self.engine)
        else:  # django
            from django.db import connection, transaction

            transaction.set_autocommit(False)
            self.handle = connection
        return jq.enqueue_sync("wake", conn=self.handle)

    async def end(self, commit: bool) -> None:
        kind, handle = self.kind, self.handle
        if kind == "asyncpg":
            await (self.tx.commit() if commit else self.tx.rollback())
            await handle.close()
        elif kind == "psycopg-async":
            await (handle.commit() if commit else handle.rollback())
            await handle.close()
        elif kind.startswith("sqlalchemy-async"):
            await (handle.commit() if commit else handle.rollback())
            await handle.close()
            await self.engine.dispose()
        else:
            await in_app_thread(lambda: self._end_sync(commit))

    def _end_sync(self, commit: bool) -> None:
        if self.kind == "django":
            from django.db import transaction

            transaction.commit() if commit else transaction.rollback()
            transaction.set_autocommit(True)
            self.handle.close()
            return
        self.handle.commit() if commit else self.handle.rollback()
        self.handle.close()
        if self.kind == "sqlalchemy-sync":
            self.engine.dispose()


def configure_django(dsn: str) -> None:
    import django
    from django.conf import settings

    if settings.configured:
        return
    url = urlsplit(dsn)
    settings.configure(
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": url.path.lstrip("/"),
                "USER": url.username or "",
                "PASSWORD": url.password or "",
                "HOST": url.hostname or "",
                "PORT": str(url.port or ""),
            }
        },
        USE_TZ=True,
    )
    django.setup()


KINDS = [
    "asyncpg",
    "psycopg-async",
    "psycopg-sync",
    "sqlalchemy-async-asyncpg",
    "sqlalchemy-async-psycopg",
    "sqlalchemy-sync",
    "django",
]


@pytest.mark.parametrize("kind", KINDS)
async def test_commit_wakes_a_worker_and_rollback_leaves_nothing(
    jq: JobQueue, db: asyncpg.Connection, schema: str, pg_dsn: str, kind: str,
    start_worker: StartWorker, notified: Notifications,
) -> None:  # fmt: skip
    if kind == "django":
        await in_app_thread(lambda: configure_django(pg_dsn))
    ran: list[int] = []

    @jq.task("wake")
    async def wake(payload: dict[str, Any], ctx: JobContext) -> None:
        ran.append(ctx.id)

    # Polling an hour apart: only the NOTIFY sent at commit can wake this worker.
    await start_worker(poll_interval=3600.0)

    committed = AppTransaction(kind, pg_dsn)
    job = await committed.enqueue(jq)
    assert await notified.so_far() == []  # not before commit
    assert (await count(db, schema), ran) == (0, [])
    await committed.end(commit=True)
    assert await notified.so_far() == ["default"]
    assert (await jq.wait(job.id, timeout=15)).status == JobStatus.COMPLETED
    assert ran == [job.id]

    rolled_back = AppTransaction(kind, pg_dsn)
    await rolled_back.enqueue(jq)
    await rolled_back.end(commit=False)
    assert await notified.so_far() == []
    assert (await count(db, schema), ran) == (1, [job.id])


@pytest.mark.parametrize("result", ['"done"', '"123"', "[1, 2]", "7"])
async def test_a_unique_keys_holder_read_on_psycopg_keeps_its_result(
    jq: JobQueue, db: asyncpg.Connection, schema: str, pg_dsn: str, result: str
) -> None:
    # psycopg decodes jsonb where asyncpg gives its text: a result that is a JSON string
    # must not be decoded a second time (an error for "done", 123 for "123"). jobqueue's
    # cursors read it as text, as asyncpg gives it (db/connections.py).
    first = await jq.enqueue("report", {}, unique_key="nightly", unique_for=60)
    await db.execute(
        f'UPDATE "{schema}".jobs SET status = \'completed\', attempts = 1, '
        f"finished_at = now(), result = $2::jsonb WHERE id = $1",
        first.id, result,
    )  # fmt: skip
    async with await psycopg.AsyncConnection.connect(pg_dsn) as app, app.transaction():
        holder = await jq.enqueue("report", {}, unique_key="nightly", conn=app)
        # Our cursors read jsonb as text; the application's own still decode it.
        async with app.cursor() as cursor:
            await cursor.execute("SELECT %s::jsonb", [result])
            assert await cursor.fetchone() == (json.loads(result),)
    assert holder.id == first.id
    assert holder.result == json.loads(result)
