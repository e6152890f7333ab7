"""Signals over real HTTP against a real `jobqueue serve` running durable handlers: a
job waits for a signal holding no slot, `POST /signals` wakes it, and it spawns and
waits for children; `GET /jobs/{id}` shows what it waits for and its children. A token
without jobs:signal is refused, an ended job is a 409 naming its state, an unknown one
a 404, bad input a 422 naming the field; each signal is one audit row."""

from __future__ import annotations

import json
import time
from typing import Any

import asyncpg
import httpx
import pytest

from tests.acceptance.test_dashboard import make_token
from tests.conftest import Spawn

pytestmark = pytest.mark.anyio


def until(what: str, check: Any, seconds: float = 20) -> Any:
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return found


async def test_a_signal_over_http_wakes_a_waiting_job(
    env: dict[str, str], spawn: Spawn, db: asyncpg.Connection, schema: str
) -> None:
    admin = make_token(env, "ops", "admin")
    reader = make_token(env, "viewer", "jobs:read", "jobs:enqueue")
    signaller = make_token(env, "approvals", "jobs:signal", "jobs:read")
    env.update(JOBQUEUE_APP="durable_app:jq", WORKER_COUNT="1")
    base = f"http://127.0.0.1:{env['PORT']}"
    spawn(["serve"], env).wait_http(base)

    def client(token: str) -> httpx.Client:
        return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"})

    with client(admin) as ops, client(reader) as viewer, client(signaller) as approvals:
        made = viewer.post(
            "/jobs", json={"type": "order_flow", "payload": {"order": 7, "items": ["a", "b"]}}
        )
        assert made.status_code == 201, made.text
        job_id = made.json()["id"]

        def waiting() -> dict[str, Any] | None:
            job: dict[str, Any] = ops.get(f"/jobs/{job_id}").json()
            return job if job["status"] == "waiting" else None

        job = until("the job to wait for its approval", waiting)
        assert job["waiting_for"]["signal"] == "approved"
        assert job["waiting_for"]["until"] is not None  # its time limit, an hour away
        assert job["worker_id"] is None
        assert [s["name"] for s in job["steps"]] == ["charge", "signal-1"]

        signal = {"name": "approved", "job_id": job_id, "payload": {"by": "ana"}}
        refused = viewer.post("/signals", json=signal)
        assert refused.status_code == 403, refused.text
        bad = approvals.post("/signals", json={"name": "", "job_id": job_id})
        assert bad.status_code == 422, bad.text
        assert bad.json()["detail"][0]["loc"] == ["body", "name"]
        nul = approvals.post("/signals", json={**signal, "name": "approved\u0000"})
        assert nul.status_code == 422, nul.text  # PostgreSQL's text holds no NUL
        assert nul.json()["detail"][0]["loc"] == ["body", "name"]
        missing = approvals.post("/signals", json={**signal, "job_id": 10**12})
        assert missing.status_code == 404, missing.text

        sent = approvals.post("/signals", json=signal)
        assert sent.status_code == 201, sent.text
        assert (sent.json()["job_id"], sent.json()["name"]) == (job_id, "approved")

        done = ops.get(f"/jobs/{job_id}", params={"wait": 30}, timeout=40).json()
        assert done["status"] == "completed", done
        assert done["result"] == {
            "charge": "ch-7",
            "approved_by": "ana",
            "boxes": ["box-a", "box-b"],
        }
        assert (done["children"]["total"], done["children"]["ended"]) == (2, 2)
        child_id = done["children"]["first"][0]["id"]
        child = ops.get(f"/jobs/{child_id}").json()
        assert (child["type"], child["spawned_by"]) == ("pack", job_id)

        late = approvals.post("/signals", json=signal)
        assert late.status_code == 409, late.text
        assert late.json()["status"] == "completed"

    audit = await db.fetch(
        f'SELECT actor, action, target, filter, result FROM "{schema}".audit_log '
        "WHERE action = 'job.signal' ORDER BY id"
    )
    assert [(r["actor"], r["target"], r["result"]) for r in audit] == [
        ("approvals", str(job_id), "ok"),
        ("approvals", str(job_id), "conflict:completed"),
    ]
    assert json.loads(audit[0]["filter"]) == {"name": "approved"}
    refusals = await db.fetchval(
        f"SELECT count(*) FROM \"{schema}\".audit_log WHERE action = 'request.refused'"
    )
    assert refusals == 1  # the token without jobs:signal
