"""A worker app that traces with OpenTelemetry's SDK: its spans go to the SDK's
in-memory exporter, and after each span ends all the finished ones are written, as
the SDK's JSON, to the file TRACE_FILE names, for the test to read."""

import json
import os
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jobqueue import JobContext, JobQueue

exporter = InMemorySpanExporter()


class WriteFinished(SpanProcessor):
    """Rewrites TRACE_FILE with every finished span, whole (renamed into place)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def on_end(self, span: ReadableSpan) -> None:
        spans = [json.loads(s.to_json()) for s in exporter.get_finished_spans()]
        with open(self.path + ".tmp", "w") as out:
            json.dump(spans, out)
        os.replace(self.path + ".tmp", self.path)


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
provider.add_span_processor(WriteFinished(os.environ["TRACE_FILE"]))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("traced_app")

jq = JobQueue()


@jq.task("traced")
async def traced(payload: dict[str, Any], ctx: JobContext) -> None:
    ctx.log.info("handling traced job")
    with tracer.start_as_current_span("charge card"):
        pass


@jq.task("flaky", max_attempts=3)
def flaky(payload: dict[str, Any], ctx: JobContext) -> None:
    ctx.log.info("flaky attempt")  # from the handler's thread: a sync handler
    if ctx.attempt == 1:
        raise ValueError("the first attempt fails")


@jq.task("tick")  # ticked by a schedule of the test's (test_tracing.py)
async def tick(payload: dict[str, Any]) -> None:
    pass
