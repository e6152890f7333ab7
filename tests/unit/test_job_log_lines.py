"""How a per-job log line is written down, and where an attempt's log is cut."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from jobqueue.db.records import ClaimedJob
from jobqueue.observability.joblogs import Capture, JobLogs

JOB = ClaimedJob(7, "import_rows", "default", {}, 1, 3, 0, datetime.now(UTC))


def capture(limit: int = 65536) -> tuple[JobLogs, Capture]:
    writer = JobLogs(None, "w", limit=limit, interval=1.0, stdlib=False)  # type: ignore[arg-type]
    return writer, writer.attempt(JOB)


def kept(c: Capture) -> str:
    return "".join(c.unwritten)


def test_a_line_is_time_level_event_and_fields_quoted_where_ambiguous() -> None:
    _, c = capture()
    event: dict[str, Any] = {"event": "saved", "job_id": 7, "type": "import_rows", "attempt": 1}
    c(None, "info", {**event, "rows": 3, "path": "/tmp/a b.csv", "empty": "", "ok": True})
    time, level, rest = kept(c).split(" ", 2)
    assert (time[10], time[-1], len(time)) == ("T", "Z", len("2026-12-01T11:19:22.648Z"))
    assert level == "info"
    assert rest == "saved rows=3 path='/tmp/a b.csv' empty='' ok=True\n"


def test_a_line_with_an_exception_carries_its_traceback() -> None:
    _, c = capture()
    try:
        raise ValueError("bad row")
    except ValueError as exc:
        c(None, "error", {"event": "failed", "exc_info": exc})
    assert kept(c).splitlines()[1:][0] == "Traceback (most recent call last):"
    assert kept(c).endswith("ValueError: bad row\n")


def test_the_log_is_cut_at_the_bound_on_a_character_and_marked_once() -> None:
    _, c = capture(limit=100)
    c.add("é" * 60 + "\n")  # 121 bytes: cut after 50 characters, 100 bytes
    c.add("never kept\n")
    text = kept(c)
    assert (
        text
        == "é" * 50 + "\n[jobqueue] log truncated: more than 100 bytes (JOBQUEUE_JOB_LOG_BYTES)\n"
    )
    assert c.truncated


def test_lines_after_the_handler_returned_are_not_its_own() -> None:
    writer, c = capture()
    c.add("during\n")
    writing = writer.settle(JOB)
    assert writing is not None  # unwritten lines: there is a write to await
    writing.close()
    c.add("after\n")
    assert kept(c) == "during\n"
    assert c.closed  # ctx.log keeps nothing now


def test_each_attempt_has_its_own_capture_and_one_that_logs_nothing_costs_no_write() -> None:
    writer, first = capture()
    assert writer.attempt(JOB) is first
    retry = dataclasses.replace(JOB, attempt=2)
    second = writer.attempt(retry)
    assert second is not first
    assert writer.forget(JOB) is None  # not the attempt held any more
    assert writer.settle(retry) is None  # it logged nothing: nothing to wait for
    assert second.closed
