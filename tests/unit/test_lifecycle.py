"""The trace id a lifecycle event carries, read from the job's W3C trace context."""

from __future__ import annotations

import pytest

from jobqueue.observability.lifecycle import trace_id

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.mark.parametrize(
    ("trace", "expected"),
    [
        ({"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"}, TRACE),
        ({"traceparent": f"00-{TRACE.upper()}-00f067aa0ba902b7-01", "tracestate": "a=b"}, TRACE),
        (None, None),
        ({}, None),
        ({"tracestate": "a=b"}, None),
        ({"traceparent": "garbage"}, None),
        ({"traceparent": f"00-{'0' * 32}-00f067aa0ba902b7-01"}, None),  # invalid by the spec
        ({"traceparent": f"00-{'z' * 32}-00f067aa0ba902b7-01"}, None),
        ({"traceparent": f"00-{TRACE[:31]}-00f067aa0ba902b7-01"}, None),
        # Enqueued in bulk: linked, its attempts in traces of their own.
        ({"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01", "relation": "link"}, None),
        # Written by the application, not by jobqueue.
        (["00-{TRACE}-00f067aa0ba902b7-01"], None),
        ({"traceparent": 42}, None),
    ],
)
def test_the_trace_id_is_the_traceparents_second_field(trace: object, expected: str | None) -> None:
    assert trace_id(trace) == expected
