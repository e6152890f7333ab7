"""OpenTelemetry traces across processes: a job enqueued here (or over HTTP, by a server
with no SDK) runs in a worker process whose spans, from the SDK's in-memory exporter,
continue the enqueuer's trace; retries, cron ticks and bulk enqueues as documented."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from tests.conftest import Process, Spawn, enqueue, get

Span = dict[str, Any]
HEADER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
HEADER_PARENT = "00f067aa0ba902b7"
TRACEPARENT = f"00-{HEADER_TRACE}-{HEADER_PARENT}-01"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer(exporter: InMemorySpanExporter) -> trace.Tracer:
    """The test process's own tracer: an SDK provider (not the global one) whose spans
    stay in ``exporter``."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test")


@pytest.fixture
def trace_file(tmp_path: Path, env: dict[str, str]) -> Path:
    path = tmp_path / "worker-spans.json"
    env["TRACE_FILE"] = str(path)
    env["JOBQUEUE_LOG_FORMAT"] = "json"
    env["RETRY_DELAY_SECONDS"] = "0.1"
    return path


@pytest.fixture
def worker(trace_file: Path, env: dict[str, str], spawn: Spawn) -> Iterator[Process]:
    """A worker process of tests/apps/traced_app.py (JOBQUEUE_TRACING left at auto)."""
    proc = spawn(["worker", "--app", "traced_app:jq"], env, "worker")
    proc.wait_for_output("worker started")
    yield proc
    assert proc.stop() == 0, proc.output


def worker_spans(
    path: Path, ready: Callable[[list[Span]], bool], timeout: float = 60
) -> list[Span]:
    """The worker's finished spans, once ``ready`` says they are all there."""
    deadline = time.monotonic() + timeout
    while True:
        spans: list[Span] = json.loads(path.read_text()) if path.exists() else []
        if ready(spans):
            return spans
        assert time.monotonic() < deadline, f"spans so far: {[s['name'] for s in spans]}"
        time.sleep(0.05)


def named(spans: list[Span], name: str) -> list[Span]:
    return [s for s in spans if s["name"] == name]


def has(name: str, count: int = 1) -> Callable[[list[Span]], bool]:
    return lambda spans: len(named(spans, name)) >= count


def sdk_spans(exporter: InMemorySpanExporter) -> list[Span]:
    return [json.loads(s.to_json()) for s in exporter.get_finished_spans()]


def ids(span: Span) -> tuple[str, str]:
    """A span's trace id and span id, as hex without the SDK's 0x."""
    return span["context"]["trace_id"][2:], span["context"]["span_id"][2:]


def parent(span: Span) -> str | None:
    return None if span["parent_id"] is None else span["parent_id"][2:]


def span_tree(spans: list[Span]) -> str:
    """The spans as an indented tree under their roots, each with its trace, kind and
    status; a span whose parent is in another process's list still nests under it."""
    by_parent: dict[str | None, list[Span]] = {}
    known = {ids(s)[1] for s in spans}
    for span in sorted(spans, key=lambda s: s["start_time"]):
        key = parent(span) if parent(span) in known else None
        by_parent.setdefault(key, []).append(span)
    lines: list[str] = []

    def walk(key: str | None, depth: int) -> None:
        for span in by_parent.get(key, []):
            kind = span["kind"].removeprefix("SpanKind.")
            lines.append(
                f"{'  ' * depth}{span['name']} [{kind} {span['status']['status_code']}] "
                f"trace={ids(span)[0][:8]}"
            )
            walk(ids(span)[1], depth + 1)

    walk(None, 0)
    return "\n".join(lines)


def test_the_worker_span_continues_the_trace_of_the_code_that_enqueued_the_job(
    settings: Settings,
    tracer: trace.Tracer,
    exporter: InMemorySpanExporter,
    trace_file: Path,
    worker: Process,
) -> None:
    with tracer.start_as_current_span("checkout") as checkout:
        job = enqueue(settings, "traced", {"order": 7})
    enqueuer_trace = trace.format_trace_id(checkout.get_span_context().trace_id)
    enqueuer_span = trace.format_span_id(checkout.get_span_context().span_id)
    assert get(settings, job.id).trace_id == enqueuer_trace

    # The attempt's span ends after its child, once the attempt's log is written.
    spans = worker_spans(trace_file, has("process traced"))
    [process] = named(spans, "process traced")
    assert ids(process)[0] == enqueuer_trace
    assert parent(process) == enqueuer_span
    assert process["kind"] == "SpanKind.CONSUMER"
    assert process["attributes"] == {
        "messaging.system": "jobqueue",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "default",
        "messaging.message.id": str(job.id),
        "jobqueue.job.type": "traced",
        "jobqueue.job.attempt": 1,
        "jobqueue.job.max_attempts": 3,
        "jobqueue.job.outcome": "completed",
    }
    [inner] = named(spans, "charge card")  # the handler's own span is a child of it
    assert parent(inner) == ids(process)[1]

    in_trace = [s for s in sdk_spans(exporter) + spans if ids(s)[0] == enqueuer_trace]
    tree = span_tree(in_trace)
    print(f"\n{tree}")
    assert [line.split(" [")[0] for line in tree.splitlines()] == [
        "checkout",
        "  process traced",
        "    charge card",
    ]

    # The handler's ctx.log line carries the ids of the span it ran in.
    assert log_lines(worker, "handling traced job") == [
        {"attempt": 1, "trace_id": ids(process)[0], "span_id": ids(process)[1]}
    ]


def test_each_attempt_is_a_span_with_the_same_parent_a_failure_recorded(
    settings: Settings,
    tracer: trace.Tracer,
    exporter: InMemorySpanExporter,
    trace_file: Path,
    worker: Process,
) -> None:
    with tracer.start_as_current_span("import") as enqueuing:
        job = enqueue(settings, "flaky", {})
    spans = worker_spans(trace_file, has("process flaky", 2))
    first, second = sorted(named(spans, "process flaky"), key=lambda s: s["start_time"])
    expected_parent = trace.format_span_id(enqueuing.get_span_context().span_id)
    assert parent(first) == parent(second) == expected_parent
    assert (
        ids(first)[0]
        == ids(second)[0]
        == trace.format_trace_id(enqueuing.get_span_context().trace_id)
    )
    assert ids(first)[1] != ids(second)[1]
    tree = span_tree([*sdk_spans(exporter), first, second])
    print(f"\n{tree}")
    assert [line.split(" trace=")[0] for line in tree.splitlines()] == [
        "import [INTERNAL UNSET]",
        "  process flaky [CONSUMER ERROR]",
        "  process flaky [CONSUMER UNSET]",
    ]

    assert first["attributes"]["jobqueue.job.attempt"] == 1
    assert first["attributes"]["jobqueue.job.outcome"] == "retried"
    assert first["attributes"]["error.type"] == "ValueError"
    assert first["status"] == {
        "status_code": "ERROR",
        "description": "ValueError: the first attempt fails",
    }
    [event] = first["events"]
    assert event["name"] == "exception"
    assert event["attributes"]["exception.type"] == "ValueError"
    assert event["attributes"]["exception.message"] == "the first attempt fails"
    assert "raise ValueError" in event["attributes"]["exception.stacktrace"]

    assert second["attributes"]["jobqueue.job.attempt"] == 2
    assert second["attributes"]["jobqueue.job.outcome"] == "completed"
    assert second["status"] == {"status_code": "UNSET"}
    assert second["events"] == []
    assert get(settings, job.id).attempts == 2
    assert log_lines(worker, "flaky attempt") == [
        {"attempt": 1, "trace_id": ids(first)[0], "span_id": ids(first)[1]},
        {"attempt": 2, "trace_id": ids(second)[0], "span_id": ids(second)[1]},
    ]


def log_lines(worker: Process, event: str) -> list[dict[str, Any]]:
    """The attempt and ids of the worker's JSON log lines of ``event``."""
    lines = [json.loads(out) for out in worker.output.splitlines() if out.startswith("{")]
    return [
        {key: line.get(key) for key in ("attempt", "trace_id", "span_id")}
        for line in lines
        if line["event"] == event
    ]


def test_a_server_without_an_sdk_records_the_request_traceparent_for_the_worker(
    env: dict[str, str], trace_file: Path, spawn: Spawn
) -> None:
    api_env = {k: v for k, v in env.items() if k != "TRACE_FILE"}
    server = spawn(["api"], api_env, "api")  # no app: no SDK, no tracer provider
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)

    headers = {"traceparent": TRACEPARENT, "tracestate": "congo=t61rcWkgMzE"}
    created = httpx.post(f"{base}/jobs", json={"type": "traced"}, headers=headers)
    assert created.status_code == 201, created.text
    traced = created.json()
    assert traced["trace_id"] == HEADER_TRACE
    assert httpx.get(f"{base}/jobs/{traced['id']}").json()["trace_id"] == HEADER_TRACE

    untraced = httpx.post(f"{base}/jobs", json={"type": "traced"}).json()
    assert untraced["trace_id"] is None
    # Malformed traceparents are ignored, as W3C Trace Context says: no error, no trace.
    for bad in (
        "not-a-traceparent",
        TRACEPARENT.upper(),
        f"00-{'0' * 32}-{HEADER_PARENT}-01",
        f"00-{HEADER_TRACE}-{'0' * 16}-01",
        f"ff-{HEADER_TRACE}-{HEADER_PARENT}-01",
        f"{TRACEPARENT}-extra",
    ):
        answer = httpx.post(f"{base}/jobs", json={"type": "noop"}, headers={"traceparent": bad})
        assert (answer.status_code, answer.json()["trace_id"]) == (201, None), bad

    batch = httpx.post(
        f"{base}/jobs/batch",
        json={"jobs": [{"type": "traced"}, {"type": "traced"}]},
        headers={"traceparent": TRACEPARENT},
    )
    assert batch.status_code == 201, batch.text
    batch_ids = batch.json()["ids"]
    for job_id in batch_ids:
        assert httpx.get(f"{base}/jobs/{job_id}").json()["trace_id"] == HEADER_TRACE

    worker = spawn(["worker", "--app", "traced_app:jq"], env, "worker")
    spans = worker_spans(trace_file, has("process traced", 4))
    by_job = {s["attributes"]["messaging.message.id"]: s for s in named(spans, "process traced")}
    one = by_job[str(traced["id"])]
    assert (ids(one)[0], parent(one)) == (HEADER_TRACE, HEADER_PARENT)
    assert "{key=congo, value=t61rcWkgMzE}" in one["context"]["trace_state"]  # its repr
    assert parent(by_job[str(untraced["id"])]) is None
    # A batch: each job's attempt starts its own trace, linked to the request's context.
    for job_id in batch_ids:
        span = by_job[str(job_id)]
        assert parent(span) is None
        assert ids(span)[0] != HEADER_TRACE
        [link] = span["links"]
        assert link["context"]["trace_id"][2:] == HEADER_TRACE
        assert link["context"]["span_id"][2:] == HEADER_PARENT
    assert worker.stop() == 0, worker.output


def test_schedule_ticks_and_bulk_enqueues_start_traces_of_their_own(
    settings: Settings, tracer: trace.Tracer, trace_file: Path, worker: Process
) -> None:
    async def enqueue_many() -> list[int]:
        async with JobQueue(settings=settings) as jq:
            # Every second, not a cron expression's minute: that waited up to a minute.
            await jq.schedules.create("ticking", "tick", every="1s")
            return await jq.enqueue_many("traced", [{"n": 1}, {"n": 2}])

    with tracer.start_as_current_span("nightly import") as importing:
        bulk = asyncio.run(enqueue_many())
    enqueuer = importing.get_span_context()

    spans = worker_spans(
        trace_file, lambda s: has("process tick")(s) and has("process traced", 2)(s)
    )
    for tick in named(spans, "process tick"):  # one a second by now, maybe more
        assert (parent(tick), tick["links"]) == (None, [])  # a root: a new trace
        assert tick["attributes"]["messaging.message.id"] != ""

    traces = set()
    for span in named(spans, "process traced"):
        assert int(span["attributes"]["messaging.message.id"]) in bulk
        assert parent(span) is None
        [link] = span["links"]
        assert link["context"]["trace_id"][2:] == trace.format_trace_id(enqueuer.trace_id)
        assert link["context"]["span_id"][2:] == trace.format_span_id(enqueuer.span_id)
        traces.add(ids(span)[0])
    assert len(traces) == 2
    assert trace.format_trace_id(enqueuer.trace_id) not in traces
    for job_id in bulk:  # the job shows the trace that enqueued it
        assert get(settings, job_id).trace_id == trace.format_trace_id(enqueuer.trace_id)


def test_a_server_with_an_sdk_puts_the_job_under_the_request_in_the_callers_trace(
    env: dict[str, str], trace_file: Path, spawn: Spawn
) -> None:
    """`serve` whose app sets up the SDK: the span active while POST /jobs runs (the
    request's, where the web framework makes one) is what the job records, and it
    continues the header's trace, so the attempt's ancestors lead to the caller's span."""
    server = spawn(["serve", "--app", "traced_app:jq"], env, "serve")
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)
    job = httpx.post(f"{base}/jobs", json={"type": "traced"}, headers={"traceparent": TRACEPARENT})
    assert job.json()["trace_id"] == HEADER_TRACE

    # The attempt's span ends after its child, once the attempt's log is written.
    spans = worker_spans(trace_file, has("process traced"))
    [process] = named(spans, "process traced")
    assert ids(process)[0] == HEADER_TRACE
    by_id = {ids(s)[1]: s for s in spans}
    chain, up = [], parent(process)
    while up in by_id:
        chain.append(by_id[up]["name"])
        up = parent(by_id[up])
    assert up == HEADER_PARENT, chain  # the topmost ancestor's parent is the caller's span
    print(f"\n{span_tree([s for s in spans if ids(s)[0] == HEADER_TRACE])}")
    assert server.stop() == 0, server.output
