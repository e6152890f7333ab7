"""The W3C trace context a job carries from whoever enqueued it to the worker that runs it.

It is stored with the job (``jobs.trace_context``) as JSON: ``{"traceparent": ...,
"tracestate": ...}`` as W3C Trace Context spells them, plus ``"relation": "link"`` for
a job enqueued in bulk, whose attempts start traces of their own that link to it
instead of joining it (see observability/tracing.py).

Recording costs nothing when there is nothing to record, and never imports
OpenTelemetry: a process that has not imported it has no span. A request's
``traceparent`` header is checked here, without OpenTelemetry, so that a server with
no SDK still passes the caller's trace on to the worker; a malformed one is ignored, as
W3C Trace Context says, and so is an invalid ``tracestate`` (the traceparent kept).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping

# version-trace_id-parent_id-flags, lowercase hex; a later version may append fields.
TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
# One list member of a tracestate: key=value (W3C Trace Context, section 3.3.1).
TRACESTATE_MEMBER = re.compile(
    r"[a-z0-9][_0-9a-z\-*/]{0,255}(@[a-z][_0-9a-z\-*/]{0,13})?"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)
MAX_HEADER = 512  # longer headers are dropped, as OpenTelemetry's own propagator does
MAX_TRACESTATE_MEMBERS = 32
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16


def recorded(request: Mapping[str, str | None] | None = None, *, bulk: bool = False) -> str | None:
    """What to store as a new job's trace context (JSON text), or None: the active
    span's, else the one ``request``'s ``traceparent`` and ``tracestate`` headers carry.
    ``bulk``: the job is one of many enqueued at once, to be linked, not parented."""
    found = active() or (None if request is None else from_headers(request))
    if found is None:
        return None
    if bulk:
        found["relation"] = "link"
    return json.dumps(found, separators=(",", ":"))


def active() -> dict[str, str] | None:
    """The current span's context, if OpenTelemetry is loaded and a span is current."""
    api = sys.modules.get("opentelemetry.trace")
    if api is None or not api.get_current_span().get_span_context().is_valid:
        return None  # the common case, kept to a dictionary lookup or two
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier or None


def from_headers(headers: Mapping[str, str | None]) -> dict[str, str] | None:
    """The context of a request's W3C headers, or None if ``traceparent`` is absent
    or malformed. A higher version's traceparent is read as version 00."""
    parent = (headers.get("traceparent") or "").strip(" \t")
    match = TRACEPARENT.fullmatch(parent) if len(parent) <= MAX_HEADER else None
    if match is None:
        return None
    version, trace_id, span_id, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest):
        return None
    if trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    found = {"traceparent": f"00-{trace_id}-{span_id}-{flags}"}
    state = valid_tracestate(headers.get("tracestate"))
    if state:
        found["tracestate"] = state
    return found


def valid_tracestate(raw: str | None) -> str | None:
    """``raw`` without its empty members, if every member is well formed; else None."""
    if not raw or len(raw) > MAX_HEADER:
        return None
    members = [m.strip(" \t") for m in raw.split(",") if m.strip(" \t")]
    if len(members) > MAX_TRACESTATE_MEMBERS:
        return None
    if not all(TRACESTATE_MEMBER.fullmatch(m) for m in members):
        return None
    return ",".join(members) or None


def imported() -> bool:
    """Whether this process has loaded OpenTelemetry's tracing API (its own code, an
    instrumentation or its web framework did): only then can it have a tracer provider."""
    return "opentelemetry.trace" in sys.modules
