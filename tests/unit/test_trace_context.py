"""The W3C trace context recorded from a request's headers: a valid traceparent kept
(with its tracestate when that is valid too), anything malformed ignored."""

from __future__ import annotations

import json

import pytest

from jobqueue.observability.trace_context import from_headers, recorded

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
PARENT = f"00-{TRACE}-{SPAN}-01"


def test_a_valid_traceparent_and_tracestate_are_kept() -> None:
    assert from_headers({"traceparent": PARENT, "tracestate": "congo=t61rcWkgMzE, rojo=00f"}) == {
        "traceparent": PARENT,
        "tracestate": "congo=t61rcWkgMzE,rojo=00f",
    }
    assert from_headers({"traceparent": f" {PARENT}\t"}) == {"traceparent": PARENT}


def test_a_later_version_is_read_as_version_00_its_extra_fields_dropped() -> None:
    assert from_headers({"traceparent": f"cc-{TRACE}-{SPAN}-01-what-the-future-brings"}) == {
        "traceparent": PARENT
    }


@pytest.mark.parametrize(
    "traceparent",
    [
        None,
        "",
        "garbage",
        PARENT.upper(),  # hex is lowercase
        f"00-{'0' * 32}-{SPAN}-01",  # all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # all-zero parent id
        f"ff-{TRACE}-{SPAN}-01",  # version ff is invalid
        f"00-{TRACE}-{SPAN}-01-extra",  # version 00 has exactly four fields
        f"00-{TRACE[:-1]}-{SPAN}-01",
        f"00-{TRACE}-{SPAN}-1",
        f"cc-{TRACE}-{SPAN}-01-{'x' * 600}",  # over 512 characters
    ],
)
def test_a_malformed_traceparent_is_ignored(traceparent: str | None) -> None:
    assert from_headers({"traceparent": traceparent, "tracestate": "congo=t61rcWkgMzE"}) is None


@pytest.mark.parametrize(
    "tracestate",
    ["=nokey", "Upper=1", "a=1,b", "a=b=c", "a=" + "x" * 600, ",".join(["k=v"] * 33)],
)
def test_an_invalid_tracestate_is_dropped_and_the_traceparent_kept(tracestate: str) -> None:
    assert from_headers({"traceparent": PARENT, "tracestate": tracestate}) == {
        "traceparent": PARENT
    }


def test_what_is_stored_marks_a_bulk_enqueue_for_a_link() -> None:
    """No span is active in this process: the request's context is what is recorded."""
    assert recorded() is None
    assert recorded({"traceparent": "garbage"}) is None
    assert json.loads(recorded({"traceparent": PARENT}) or "") == {"traceparent": PARENT}
    assert json.loads(recorded({"traceparent": PARENT}, bulk=True) or "") == {
        "traceparent": PARENT,
        "relation": "link",
    }
