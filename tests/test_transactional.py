"""enqueue(conn=...) on the application's own psycopg 3 connection: the job exists exactly
when the application's transaction commits, and workers are woken at commit."""

from __future__ import annotations

import asyncio

import asyncpg
import psycopg
import pytest

from jobqueue.app import JobQueue
from jobqueue.db.sql import channel_name

pytestmark = pytest.mark.anyio


async def count(db: asyncpg.Connection, schema: str) -> int:
    n: int = await db.fetchval(f'SELECT count(*) FROM "{schema}".jobs')
    return n


async def test_async_psycopg_commit_stores_and_notifies_rollback_leaves_nothing(
    jq: JobQueue, db: asyncpg.Connection, schema: str, pg_dsn: str
) -> None:
    heard: asyncio.Queue[str] = asyncio.Queue()
    await db.add_listener(channel_name(schema), lambda *args: heard.put_nowait(args[-1]))
    async with await psycopg.AsyncConnection.connect(pg_dsn) as app:
        async with app.transaction():
            job = await jq.enqueue("send_email", {"to": "a@example.com"}, conn=app)
            assert job.payload == {"to": "a@example.com"}
            assert await count(db, schema) == 0  # not visible before the commit
            assert heard.empty()
        assert await asyncio.wait_for(heard.get(), 5) == "default"  # woken at commit
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
