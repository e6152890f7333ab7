"""The seed's walkthrough, end to end, over real HTTP against `jobqueue serve`."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.conftest import Spawn


def wait_status(base: str, job_id: int, status: str, timeout: float = 20) -> dict[str, Any]:
    """The job once final (a long-poll), which must be in ``status``."""
    answer = httpx.get(f"{base}/jobs/{job_id}", params={"wait": timeout}, timeout=timeout + 10)
    job: dict[str, Any] = answer.json()
    assert job["status"] == status, job
    return job


def test_seed_walkthrough(env: dict[str, str], spawn: Spawn) -> None:
    env["RETRY_DELAY_SECONDS"] = "0.3"
    env["JOBQUEUE_LOG_FORMAT"] = "json"
    server = spawn(["serve"], env)
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)

    created = httpx.post(
        f"{base}/jobs",
        headers={"Content-Type": "application/json"},
        content='{"type": "send_email", "payload": {"to": "a@example.com"}}',
    )
    assert created.status_code == 201
    email = wait_status(base, created.json()["id"], "completed")
    assert email["attempts"] == 1

    failing = httpx.post(f"{base}/jobs", json={"type": "fail_test", "payload": {}}).json()
    failed = wait_status(base, failing["id"], "failed")
    assert failed["attempts"] == 3
    assert failed["last_error"] == "RuntimeError: fail_test always fails"
    # Stays failed: a job enqueued after it has run, yet no further attempt was made.
    later = httpx.post(f"{base}/jobs", json={"type": "noop", "payload": {}}).json()
    wait_status(base, later["id"], "completed")
    assert httpx.get(f"{base}/jobs/{failing['id']}").json()["attempts"] == 3

    listed = httpx.get(f"{base}/jobs", params={"status": "failed"}).json()["jobs"]
    assert [j["id"] for j in listed] == [failing["id"]]

    assert server.stop() == 0
    out = server.output
    n = failing["id"]
    events = [(e["event"], e.get("attempt")) for e in lifecycle_events(out, n)]
    assert events == [
        ("job.started", 1), ("job.retried", 1), ("job.started", 2), ("job.retried", 2),
        ("job.started", 3), ("job.failed", 3),
    ]  # fmt: skip
    assert [e["event"] for e in lifecycle_events(out, email["id"])] == [
        "job.started",
        "job.completed",
    ]


def lifecycle_events(output: str, job_id: int) -> list[dict[str, object]]:
    """The job.* events of one job in a JSON-log process's output, in order."""
    events = []
    for line in output.splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            if str(event.get("event", "")).startswith("job.") and event.get("job_id") == job_id:
                events.append(event)
    return events
