"""Job lifecycle log events, as a real `jobqueue serve` with JSON logs prints them: one
line per event, under its stable name, with the fields docs/job-logs.md lists."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
import httpx

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from tests.conftest import Spawn

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
# The demo tasks, JSON logs, retries at once, and a leader that rescues quickly.
SERVER_ENV = {
    "JOBQUEUE_APP": "jobqueue.demo:jq",
    "JOBQUEUE_LOG_FORMAT": "json",
    "RETRY_DELAY_SECONDS": "0",
    "JOBQUEUE_RESCUE_INTERVAL": "0.2",
}
ATTEMPT_FIELDS = {"job_id", "type", "queue", "attempt", "max_attempts", "worker_id", "wait_ms"}


def events(output: str) -> list[dict[str, Any]]:
    """Every job.* event of a JSON-log process's output, in order."""
    found = []
    for line in output.splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            if str(event.get("event", "")).startswith("job."):
                found.append(event)
    return found


async def seed(settings: Settings, pg_dsn: str) -> dict[str, int]:
    """Jobs waiting before the server starts: one traced, one failing, one parked in a
    queue nobody works (to be cancelled while pending), one whose worker is gone."""
    async with JobQueue(settings=settings) as jq:
        ids = {
            "traced": (await jq.enqueue("send_email", {"to": "a@example.com"})).id,
            "failing": (await jq.enqueue("fail_test", {})).id,
            "parked": (await jq.enqueue("noop", {}, queue="parked")).id,
        }
    conn = await asyncpg.connect(pg_dsn)
    try:
        schema = settings.schema
        await conn.execute(
            f'UPDATE "{schema}".jobs SET trace_context = $2::jsonb WHERE id = $1',
            ids["traced"],
            json.dumps({"traceparent": TRACEPARENT}),
        )
        ids["orphan"] = await conn.fetchval(
            f"""INSERT INTO "{schema}".jobs (type, queue, status, attempts, worker_id,
                                             started_at, lease_expires_at)
                VALUES ('noop', 'default', 'running', 1, 'gone:1:abcdef',
                        now() - interval '2 minutes', now() - interval '1 minute')
                RETURNING id"""
        )
    finally:
        await conn.close()
    return ids


def test_a_json_log_server_prints_each_lifecycle_event_with_its_fields(
    settings: Settings, pg_dsn: str, env: dict[str, str], spawn: Spawn
) -> None:
    ids = asyncio.run(seed(settings, pg_dsn))
    env.update(SERVER_ENV)
    server = spawn(["serve"], env)
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)
    assert httpx.post(f"{base}/jobs/{ids['parked']}/cancel").status_code == 200
    sleeper = httpx.post(f"{base}/jobs", json={"type": "sleep", "payload": {"seconds": 60}})
    ids["sleeper"] = sleeper.json()["id"]
    server.wait_for_output(f'"job_id": {ids["sleeper"]}')  # its job.started
    assert httpx.post(f"{base}/jobs/{ids['sleeper']}/cancel").status_code == 202  # asked
    for name, status in [
        ("traced", "completed"), ("failing", "failed"), ("orphan", "completed"),
        ("sleeper", "cancelled"),
    ]:  # fmt: skip
        job = httpx.get(f"{base}/jobs/{ids[name]}", params={"wait": 20}, timeout=30).json()
        assert job["status"] == status, (name, job)
    # The demo's send_email logs through ctx.log: its line is kept with the attempt.
    [attempt] = httpx.get(f"{base}/jobs/{ids['traced']}/attempts").json()["attempts"]
    assert (attempt["attempt"], attempt["error"], attempt["log_truncated"]) == (1, None, False)
    assert attempt["log"].split(" ", 1)[1] == (
        "info Sending email (simulated) to=a@example.com subject=None\n"
    )
    assert server.stop() == 0

    seen = events(server.output)
    by_job = {
        name: [(e["event"], e.get("attempt")) for e in seen if e.get("job_id") == job_id]
        for name, job_id in ids.items()
    }
    assert by_job == {
        "traced": [("job.started", 1), ("job.completed", 1)],
        "failing": [
            ("job.started", 1), ("job.retried", 1), ("job.started", 2), ("job.retried", 2),
            ("job.started", 3), ("job.failed", 3),
        ],
        "parked": [("job.cancelled", None)],
        "orphan": [("job.rescued", 1), ("job.started", 2), ("job.completed", 2)],
        "sleeper": [("job.started", 1), ("job.cancelled", 1)],
    }  # fmt: skip

    worker_events = [e for e in seen if e["event"] not in ("job.rescued",)]
    worker_events = [e for e in worker_events if e.get("job_id") != ids["parked"]]
    for e in worker_events:
        assert e.keys() >= ATTEMPT_FIELDS, e
        assert isinstance(e["wait_ms"], float), e
        if e["event"] != "job.started":
            assert isinstance(e["duration_ms"], float), e
    [completed] = [
        e for e in seen if e["event"] == "job.completed" and e["job_id"] == ids["traced"]
    ]
    assert (completed["type"], completed["queue"], completed["max_attempts"]) == (
        "send_email",
        "default",
        3,
    )
    assert completed["trace_id"] == TRACE_ID
    assert all("trace_id" not in e for e in seen if e.get("job_id") != ids["traced"])
    retried = [e for e in seen if e["event"] == "job.retried"]
    assert [isinstance(e["retry_in_ms"], float) for e in retried] == [True, True]
    [failed] = [e for e in seen if e["event"] == "job.failed"]
    assert "retry_in_ms" not in failed
    assert (failed["level"], failed["error"]) == ("warning", "RuntimeError: fail_test always fails")
    assert "Traceback" in failed["exception"]
    [rescued] = [e for e in seen if e["event"] == "job.rescued"]
    assert (rescued["level"], rescued["status"], rescued["error"], rescued["max_attempts"]) == (
        "warning",
        "pending",
        "worker lost (lease expired)",
        3,
    )
    assert (rescued["job_id"], rescued["type"], rescued["queue"]) == (
        ids["orphan"],
        "noop",
        "default",
    )
    [parked] = [e for e in seen if e.get("job_id") == ids["parked"]]
    assert (parked["type"], parked["queue"]) == ("noop", "parked")
