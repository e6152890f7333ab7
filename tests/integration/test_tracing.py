"""The trace context every way of enqueueing records: the caller's active span, stored
with the job and shown as its trace_id; bulk enqueues marked for a link; nothing
without a span."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
import psycopg
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

from jobqueue.app import JobQueue
from jobqueue.enqueue.new_job import NewJob

pytestmark = pytest.mark.anyio

TRACER = TracerProvider().get_tracer("test")  # not the global provider: this process's own


def hex_ids(span: trace.Span) -> tuple[str, str]:
    ids = span.get_span_context()
    return trace.format_trace_id(ids.trace_id), trace.format_span_id(ids.span_id)


def traceparent(span: trace.Span) -> str:
    trace_id, span_id = hex_ids(span)
    return f"00-{trace_id}-{span_id}-{span.get_span_context().trace_flags:02x}"


async def stored(db: asyncpg.Connection, schema: str, job_id: int) -> Any:
    raw = await db.fetchval(f'SELECT trace_context FROM "{schema}".jobs WHERE id = $1', job_id)
    return None if raw is None else json.loads(raw)


async def test_enqueue_records_the_active_span_and_the_job_shows_its_trace(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    plain = await jq.enqueue("report", {})
    assert plain.trace_id is None
    assert await stored(db, schema, plain.id) is None

    with TRACER.start_as_current_span("request") as span:
        job = await jq.enqueue("report", {})
        unique = await jq.enqueue("report", {}, unique_key="once")
    trace_id = hex_ids(span)[0]
    assert job.trace_id == unique.trace_id == trace_id
    assert await stored(db, schema, job.id) == {"traceparent": traceparent(span)}
    assert (await jq.get(job.id)) == job
    assert {j.id: j.trace_id for j in await jq.list()} == {
        plain.id: None,
        job.id: trace_id,
        unique.id: trace_id,
    }


async def test_concurrent_enqueues_sharing_an_insert_keep_each_its_own_trace(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    async def in_span(i: int) -> tuple[str, int]:
        with TRACER.start_as_current_span(f"request {i}") as span:
            job = await jq.enqueue("report", {"i": i})
            return hex_ids(span)[0], job.id

    results = await asyncio.gather(*(in_span(i) for i in range(50)))
    assert len({trace_id for trace_id, _ in results}) == 50
    for trace_id, job_id in results:
        job = await jq.get(job_id)
        assert job is not None
        assert job.trace_id == trace_id


async def test_the_tracestate_is_kept_with_the_traceparent(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    remote = SpanContext(
        trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736,
        span_id=0x00F067AA0BA902B7,
        is_remote=True,
        trace_flags=TraceFlags(0),  # not sampled: kept as it is
        trace_state=TraceState([("congo", "t61rcWkgMzE")]),
    )
    with trace.use_span(NonRecordingSpan(remote)):
        job = await jq.enqueue("report", {})
    assert await stored(db, schema, job.id) == {
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
        "tracestate": "congo=t61rcWkgMzE",
    }


async def test_sync_and_transactional_enqueues_record_the_callers_span(
    jq: JobQueue, pg_dsn: str
) -> None:
    def app_code() -> list[tuple[str | None, str]]:
        found = []
        with TRACER.start_as_current_span("sync request") as span:
            # Through the sync API's own loop thread, and on the caller's connection.
            found.append((jq.enqueue_sync("report", {}).trace_id, hex_ids(span)[0]))
            with psycopg.connect(pg_dsn) as app, app.transaction():
                job = jq.enqueue_sync("report", {}, conn=app)
            found.append((job.trace_id, hex_ids(span)[0]))
        return found

    for got, expected in await asyncio.to_thread(app_code):
        assert got == expected
    async with await psycopg.AsyncConnection.connect(pg_dsn) as app:
        with TRACER.start_as_current_span("async request") as span:
            async with app.transaction():
                job = await jq.enqueue("report", {}, conn=app)
    assert job.trace_id == hex_ids(span)[0]  # psycopg hands jsonb back decoded
    jq.close_sync()


async def test_bulk_enqueues_record_the_callers_context_for_a_link(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    with TRACER.start_as_current_span("import") as span:
        many = await jq.enqueue_many("report", [{"n": 1}, {"n": 2}])
        listed = await jq.enqueue_jobs([NewJob(type="report"), NewJob(type="noop")])
    trace_id = hex_ids(span)[0]
    for job_id in many + listed:
        assert await stored(db, schema, job_id) == {
            "traceparent": traceparent(span),
            "relation": "link",
        }
        job = await jq.get(job_id)
        assert job is not None
        assert job.trace_id == trace_id
    assert [await stored(db, schema, i) for i in await jq.enqueue_many("report", [{}])] == [None]


async def test_a_trace_context_not_written_by_jobqueue_shows_no_trace(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    """A row the application inserted itself, with something else in the column."""
    for junk in ('"junk"', "{}", '{"traceparent": 7}', '{"traceparent": "00-short"}'):
        job_id = await db.fetchval(
            f"""INSERT INTO "{schema}".jobs (type, trace_context) VALUES ('report', $1::jsonb)
                RETURNING id""",
            junk,
        )
        job = await jq.get(job_id)
        assert job is not None
        assert job.trace_id is None, junk


@pytest.mark.parametrize("driver", ["asyncpg", "psycopg"])
async def test_an_enqueue_on_a_sqlalchemy_session_records_the_span(
    jq: JobQueue, pg_dsn: str, driver: str
) -> None:
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    engine = create_async_engine(pg_dsn.replace("postgresql://", f"postgresql+{driver}://", 1))
    try:
        async with AsyncSession(engine) as session, session.begin():
            with TRACER.start_as_current_span("request") as span:
                job = await jq.enqueue("report", {}, conn=session)
    finally:
        await engine.dispose()
    assert job.trace_id == hex_ids(span)[0]
    assert await jq.get(job.id) == job
