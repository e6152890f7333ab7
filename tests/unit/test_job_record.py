"""A row of the jobs table becomes a Job field by field, each from its own column."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from jobqueue.model.job import Job, JobStatus, Progress
from jobqueue.model.steps import Step

T0 = datetime(2026, 12, 2, tzinfo=UTC)


def row(**changes: Any) -> dict[str, Any]:
    """A row as every Executor gives it (jsonb as text, db/connections.py), each
    column holding a value no other column holds, so that a value read from the wrong
    column shows."""
    values: dict[str, Any] = {
        "id": 41,
        "type": "send_email",
        "queue": "mail",
        "payload": '{"to": "a@example.com"}',
        "status": "running",
        "attempts": 2,
        "max_attempts": 5,
        "priority": -3,
        "run_at": T0,
        "last_error": "boom",
        "worker_id": "host:1:abc",
        "created_at": T0 + timedelta(seconds=1),
        "updated_at": T0 + timedelta(seconds=2),
        "started_at": T0 + timedelta(seconds=3),
        "finished_at": T0 + timedelta(seconds=4),
        "unique_key": "order-7",
        "cancel_requested_at": T0 + timedelta(seconds=5),
        "result": '{"sent": 1}',
        "progress": json.dumps(
            {"fraction": 0.5, "message": "half", "updated_at": "2026-12-02T00:00:06+00:00"}
        ),
        "trace_context": json.dumps(
            {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
        ),
        "workflow_id": 9,
        "concurrency_key": "tenant-3",
        "tags": ["import", "nightly"],
        "meta": '{"customer": "acme"}',
        "checkpoint": '{"row": 400}',
        "claim_token": 77,  # columns the Job leaves out are ignored
    }
    return values | changes


def test_every_field_comes_from_its_own_column() -> None:
    job = Job.from_record(row())
    expected = row()
    converted = {"payload", "status", "result", "progress", "trace_id", "meta", "checkpoint"}
    for field in dataclasses.fields(Job):
        if field.name not in converted:
            assert getattr(job, field.name) == expected[field.name], field.name
    assert job.payload == {"to": "a@example.com"}
    assert job.status is JobStatus.RUNNING
    assert job.result == {"sent": 1}
    assert job.progress == Progress(0.5, "half", T0 + timedelta(seconds=6))
    assert job.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert job.meta == {"customer": "acme"}
    assert job.checkpoint == {"row": 400}


def test_empty_columns_and_json_of_every_kind() -> None:
    """A new job has no result, progress or trace; a result or checkpoint may be any
    JSON, and one that is a string is read once: '"123"' is the string "123"."""
    job = Job.from_record(
        row(payload='{"n": 1}', result=None, progress=None, trace_context=None,
            status="pending")
    )  # fmt: skip
    assert (job.payload, job.result, job.progress, job.trace_id) == ({"n": 1}, None, None, None)
    assert Job.from_record(row(payload="{}")).payload == {}
    untagged = Job.from_record(row(tags=None, meta=None))  # NULL: none (migration 0030)
    assert (untagged.tags, untagged.meta) == ([], {})
    assert Job.from_record(row(checkpoint=None)).checkpoint is None
    assert Job.from_record(row(checkpoint="7")).checkpoint == 7
    stringly = Job.from_record(row(result='"123"', checkpoint='"done"'))
    assert (stringly.result, stringly.checkpoint) == ("123", "done")
    assert Job.from_record(row(checkpoint='"[1]"')).checkpoint == "[1]"
    assert Job.from_record(row(result="null")).result is None  # a handler returned None


def test_a_steps_result_is_read_from_its_text() -> None:
    step = {"name": "charge", "attempt": 1, "worker_id": "w", "recorded_at": T0}
    assert Step.from_record(step | {"result": '"123"'}).result == "123"
    assert Step.from_record(step | {"result": '{"ok": true}'}).result == {"ok": True}
    assert Step.from_record(step | {"result": None}).result is None


def test_every_status_is_read() -> None:
    assert {Job.from_record(row(status=s.value)).status for s in JobStatus} == set(JobStatus)
