"""OpenTelemetry traces of job attempts: each attempt is a consumer span.

The span, ``process <type>``, follows OpenTelemetry's messaging conventions. Its parent
is the context recorded when the job was enqueued (observability/trace_context.py), so
the job's work shows in its enqueuer's trace, under the span that enqueued it; every
attempt of a job is a span of its own, with that same parent. A job enqueued in bulk
(``enqueue_many``, ``POST /jobs/batch``) starts a trace of its own that links to its
enqueuer's context instead: one enqueue of ten thousand jobs would otherwise make one
trace of ten thousand children, open for as long as the last one waits. A job enqueued
with no span active (a cron tick, a plain INSERT) starts a new trace.

The span is the current one while the handler runs (a sync handler's thread too), so
the handler's own spans are its children, and its log lines carry ``trace_id`` and
``span_id`` (bound with structlog's context variables, which jobqueue's loggers, and
structlog's default configuration, merge into every line).

Spans go to the global tracer provider: the application sets it up (an SDK with an
exporter), or ``opentelemetry-instrument`` does. This module imports OpenTelemetry, so
it is imported only when JOBQUEUE_TRACING turns it on (observability/__init__.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import Token
from dataclasses import dataclass
from typing import Any

import structlog
from opentelemetry import context, trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from jobqueue.db.records import ClaimedJob
from jobqueue.observability.attempts import Outcome

TRACER_NAME = "jobqueue"
# Outcomes in which the handler raised: the span records the exception, status ERROR.
FAILED: frozenset[Outcome] = frozenset({"retried", "failed", "discarded"})
_PROPAGATOR = TraceContextTextMapPropagator()


def observer(mode: str) -> Tracing | None:
    """The tracing observer for JOBQUEUE_TRACING ``mode`` (``auto`` or ``on``), or None:
    ``auto`` in a process whose tracer provider is not set up."""
    if mode == "auto" and not configured(trace.get_tracer_provider()):
        return None
    return Tracing(trace.get_tracer(TRACER_NAME))


def configured(provider: trace.TracerProvider) -> bool:
    """Whether ``provider`` records spans: the API's stand-ins do not (the proxy in
    place until one is set, or the no-op one)."""
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


@dataclass(slots=True)
class Attempt:
    """What ``started`` leaves for ``ended``."""

    span: Span
    token: Token[context.Context]
    log_ids: Mapping[str, Token[Any]] | None  # the log context variables bound, to reset


class Tracing:
    """The attempt observer that opens and closes each attempt's span."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    def started(self, job: ClaimedJob) -> Attempt:
        parent, links = origin(job.trace)
        span = self._tracer.start_span(
            f"process {job.type}",
            context=parent,
            kind=SpanKind.CONSUMER,
            links=links,
            attributes={
                "messaging.system": "jobqueue",
                "messaging.operation.type": "process",
                "messaging.operation.name": "process",
                "messaging.destination.name": job.queue,
                "messaging.message.id": str(job.id),
                "jobqueue.job.type": job.type,
                "jobqueue.job.attempt": job.attempt,
                "jobqueue.job.max_attempts": job.max_attempts,
            },
        )
        token = context.attach(trace.set_span_in_context(span))
        ids = span.get_span_context()
        log_ids = None
        if ids.is_valid:
            log_ids = structlog.contextvars.bind_contextvars(
                trace_id=trace.format_trace_id(ids.trace_id),
                span_id=trace.format_span_id(ids.span_id),
            )
        return Attempt(span, token, log_ids)

    def ended(
        self,
        job: ClaimedJob,
        state: object,
        outcome: Outcome,
        seconds: float,
        error: BaseException | None,
    ) -> None:
        if not isinstance(state, Attempt):  # started failed: nothing to end
            return
        span = state.span
        span.set_attribute("jobqueue.job.outcome", outcome)
        if outcome in FAILED and error is not None:
            span.record_exception(error)
            span.set_attribute("error.type", _qualified_name(type(error)))
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end()
        if state.log_ids is not None:
            structlog.contextvars.reset_contextvars(**state.log_ids)
        context.detach(state.token)


def origin(stored: dict[str, str] | None) -> tuple[context.Context, list[Link]]:
    """The parent context and links of an attempt's span, from the job's recorded
    trace context: its child, or (bulk) a new trace linked to it, or a new trace."""
    new_trace = context.Context()
    if not isinstance(stored, dict):  # none recorded (or not by jobqueue)
        return new_trace, []
    headers = {key: value for key, value in stored.items() if isinstance(value, str)}
    recorded = _PROPAGATOR.extract(headers, new_trace)  # one it cannot read: a new trace
    if stored.get("relation") == "link":
        linked = trace.get_current_span(recorded).get_span_context()
        return new_trace, [Link(linked)] if linked.is_valid else []
    return recorded, []


def _qualified_name(cls: type) -> str:
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )
