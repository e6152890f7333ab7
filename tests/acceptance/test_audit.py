"""The audit log over a real `jobqueue api`: actions taken over HTTP are listed by
GET /audit with the client's address, and by `jobqueue audit` beside the CLI's own."""

from __future__ import annotations

import getpass
import json

import httpx

from tests.conftest import Spawn, jobqueue


def test_actions_over_http_and_the_cli_are_listed_newest_first(
    env: dict[str, str], spawn: Spawn
) -> None:
    api = spawn(["api"], env, name="api")
    base = f"http://127.0.0.1:{env['PORT']}"
    api.wait_http(base)
    job = httpx.post(f"{base}/jobs", json={"type": "report"}).json()
    assert httpx.post(f"{base}/jobs/{job['id']}/retry").status_code == 409
    assert httpx.post(f"{base}/jobs/{job['id']}/cancel").status_code == 200
    assert httpx.post(f"{base}/jobs/retry", json={"type": "report"}).json() == {"retried": 1}
    assert httpx.post(f"{base}/queues/mail/pause").status_code == 200
    assert jobqueue(env, "queues", "resume", "mail").returncode == 0

    answer = httpx.get(f"{base}/audit", params={"limit": 10})
    assert answer.status_code == 200
    entries = answer.json()["entries"]
    user = f"cli:{getpass.getuser()}"
    assert [(e["actor"], e["client"], e["action"], e["result"]) for e in entries] == [
        (user, None, "queue.resume", "ok"),
        ("anonymous", "127.0.0.1", "queue.pause", "ok"),
        ("anonymous", "127.0.0.1", "jobs.retry", "ok"),
        ("anonymous", "127.0.0.1", "job.cancel", "ok"),
        ("anonymous", "127.0.0.1", "job.retry", "conflict:pending"),
    ]
    assert entries[2]["filter"] == {"type": "report", "statuses": ["cancelled", "failed"]}
    assert entries[2]["count"] == 1
    assert answer.json()["next_after"] is None

    listed = jobqueue(env, "audit", "--json", "--actor", "anonymous")
    assert [e["action"] for e in json.loads(listed.stdout)] == [
        "queue.pause", "jobs.retry", "job.cancel", "job.retry"
    ]  # fmt: skip
    table = jobqueue(env, "audit", "--limit", "1").stdout.splitlines()
    assert table[0].split() == ["ID", "AT", "ACTOR", "ACTION", "ON", "COUNT", "CLIENT", "RESULT"]
    assert table[1].split()[3:] == [user, "queue.resume", "mail", "ok"]
    bad = jobqueue(env, "audit", "--limit", "501")
    assert (bad.returncode, bad.stderr) == (
        2,
        "jobqueue: error: --limit must be from 1 to 500, got 501\n",
    )
    assert api.stop() == 0
