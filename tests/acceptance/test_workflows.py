"""Workflows over a real `jobqueue serve`: POST /workflows runs a diamond in order, a
cycle or an unknown ref is a 422 naming it with nothing stored, GET shows every node's
state, cancel stops what is left; and the `jobqueue workflows` command, whose `list` shows
the newest workflows with their jobs counted by state."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from tests.conftest import Spawn, fetch, jobqueue


def node(ref: str, type: str = "send_email", *after: str, **options: Any) -> dict[str, Any]:
    return {"ref": ref, "type": type, "payload": {"to": ref}, "depends_on": list(after), **options}


def until_ended(base: str, workflow_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        workflow: dict[str, Any] = httpx.get(f"{base}/workflows/{workflow_id}").json()
        if workflow["status"] != "running":
            return workflow
        assert time.monotonic() < deadline, workflow
        time.sleep(0.1)


def test_workflows_over_http_and_the_command_line(
    env: dict[str, str], spawn: Spawn, pg_dsn: str, schema: str
) -> None:
    env["JOBQUEUE_APP"] = "jobqueue.demo:jq"
    server = spawn(["serve"], env)
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)

    diamond = [node("a"), node("b", "send_email", "a"), node("c", "send_email", "a")]
    diamond.append(node("d", "send_email", "b", "c", priority=-1, max_attempts=2))
    answer = httpx.post(f"{base}/workflows", json={"name": "diamond", "jobs": diamond})
    assert answer.status_code == 201, answer.text
    created = answer.json()
    assert [j["ref"] for j in created["jobs"]] == ["a", "b", "c", "d"]
    workflow = until_ended(base, created["id"])
    assert workflow["status"] == "completed"
    nodes = {n["ref"]: n for n in workflow["jobs"]}
    assert nodes["d"]["depends_on"] == ["b", "c"]
    assert nodes["d"]["job"]["result"] == {"sent_to": "d"}
    assert (nodes["d"]["job"]["priority"], nodes["d"]["job"]["max_attempts"]) == (-1, 2)
    assert nodes["d"]["job"]["started_at"] >= max(
        nodes["b"]["job"]["finished_at"], nodes["c"]["job"]["finished_at"]
    )
    assert nodes["b"]["job"]["workflow_id"] == created["id"]
    metrics = httpx.get(f"{base}/metrics").text
    assert 'jobqueue_workflows_created_total{workflow="diamond"} 1.0' in metrics

    before = fetch(pg_dsn, f'SELECT count(*) FROM "{schema}".jobs')
    cycle = [node("x", "noop", "z"), node("y", "noop", "x"), node("z", "noop", "y")]
    answer = httpx.post(f"{base}/workflows", json={"jobs": cycle})
    assert answer.status_code == 422
    [error] = answer.json()["detail"]
    assert error["field"].startswith("jobs.")
    assert error["field"].endswith(".depends_on")
    assert "cycle: " in error["msg"]
    answer = httpx.post(f"{base}/workflows", json={"jobs": [node("x", "noop", "nope")]})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["field"] == "jobs.0.depends_on"
    assert "unknown ref 'nope'" in answer.json()["detail"][0]["msg"]
    answer = httpx.post(f"{base}/workflows", json={"jobs": [node("x", "noop"), {"ref": "y"}]})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["field"] == "jobs.1.type"
    answer = httpx.post(f"{base}/workflows", json={"jobs": [{"ref": "x\x00", "type": "noop"}]})
    assert answer.status_code == 422  # a NUL: no text PostgreSQL can store
    assert answer.json()["detail"][0]["field"] == "jobs.0.ref"
    assert fetch(pg_dsn, f'SELECT count(*) FROM "{schema}".jobs') == before

    # A long first job: the rest is still blocked when the workflow is cancelled.
    chain = [node("s", "sleep"), node("t", "noop", "s"), node("u", "noop", "t")]
    chain[0]["payload"] = {"seconds": 60}
    created = httpx.post(f"{base}/workflows", json={"jobs": chain}).json()
    got = jobqueue(env, "workflows", "get", str(created["id"]))
    assert got.returncode == 0, got.stderr
    assert f"workflow {created['id']}: running, 3 jobs" in got.stdout
    assert "blocked" in got.stdout
    cancelled = jobqueue(env, "workflows", "cancel", str(created["id"]), "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    states = {n["ref"]: n["job"]["status"] for n in json.loads(cancelled.stdout)["jobs"]}
    assert states["t"] == states["u"] == "cancelled"
    assert until_ended(base, created["id"])["status"] == "cancelled"
    assert httpx.post(f"{base}/workflows/{created['id']}/cancel").status_code == 200
    assert httpx.get(f"{base}/workflows/999999").status_code == 404
    missing = jobqueue(env, "workflows", "get", "999999")
    assert (missing.returncode, missing.stderr) == (
        1,
        "jobqueue: error: workflow 999999 not found\n",
    )
    actions = fetch(pg_dsn, f'SELECT action FROM "{schema}".audit_log ORDER BY id')
    assert [r["action"] for r in actions] == ["workflow.cancel", "workflow.cancel"]

    listed = jobqueue(env, "workflows", "list")
    assert listed.returncode == 0, listed.stderr
    header, newest, diamond = (line.split() for line in listed.stdout.splitlines())
    assert header == [
        "ID", "NAME", "CREATED", "STATE",
        "BLOCKED", "PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "WAITING",
    ]  # fmt: skip
    # CREATED is a date and a time; the chain has no name.
    assert [newest[0], *newest[3:]] == [str(created["id"]), "cancelled", *"0000030"]
    assert [diamond[1], *diamond[4:]] == ["diamond", "completed", *"0004000"]
    [only] = json.loads(jobqueue(env, "workflows", "list", "--limit", "1", "--json").stdout)
    assert (only["id"], only["status"], only["jobs"]["cancelled"]) == (
        created["id"],
        "cancelled",
        3,
    )
    refused = jobqueue(env, "workflows", "list", "--limit", "0")
    assert (refused.returncode, refused.stderr) == (
        2,
        "jobqueue: error: --limit must be a positive integer, got '0'\n",
    )
