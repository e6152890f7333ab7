"""The audit log over a real `jobqueue api`: actions taken over HTTP are listed by
GET /audit with the client's address, and by `jobqueue audit` beside the CLI's own;
a flood of refused requests is one row counting them."""

from __future__ import annotations

import getpass
import json

import asyncpg
import httpx
import pytest

from tests.acceptance.test_auth import make_token
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


@pytest.mark.anyio
async def test_a_flood_of_refused_requests_is_one_row_with_who_what_and_the_outcome(
    env: dict[str, str], spawn: Spawn, db: asyncpg.Connection, schema: str
) -> None:
    reader = await make_token(db, schema, "reader", ["jobs:read"])
    admin = await make_token(db, schema, "admin", ["admin"])
    api = spawn(["api"], env, name="api")
    base = f"http://127.0.0.1:{env['PORT']}"
    api.wait_http(base)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        for _ in range(50):
            answer = await client.post(
                "/queues/mail/pause", headers={"Authorization": f"Bearer {reader}"}
            )
            assert answer.status_code == 403
        listed = await client.get("/audit", headers={"Authorization": f"Bearer {admin}"})
    [entry] = listed.json()["entries"]
    assert (entry["actor"], entry["client"], entry["action"], entry["target"]) == (
        "reader", "127.0.0.1", "request.refused", "POST /queues/mail/pause"
    )  # fmt: skip
    # Counted in memory until the minute ends, or the process stops.
    assert (entry["count"], entry["result"]) == (1, "forbidden:scope=queues:control")
    assert api.stop() == 0

    table = jobqueue(env, "audit", "--action", "request.refused").stdout.splitlines()
    assert len(table) == 2, table
    assert table[1].split()[3:] == [
        "reader", "request.refused", "POST", "/queues/mail/pause", "50", "127.0.0.1",
        "forbidden:scope=queues:control",
    ]  # fmt: skip
