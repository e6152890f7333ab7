"""The HTTP API over a real `jobqueue serve` or `jobqueue api`: long-polls, including one
in flight when the server stops, and concurrent requests with one idempotency key."""

from __future__ import annotations

import asyncio
import http.client
import json
import subprocess
import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.conftest import Spawn

pytestmark = pytest.mark.anyio


def test_http_long_poll_over_a_real_server(env: dict[str, str], spawn: Spawn) -> None:
    env.update(
        JOBQUEUE_APP="jobqueue.demo:jq",
        JOBQUEUE_PROGRESS_INTERVAL="0.1",
        JOBQUEUE_SHUTDOWN_TIMEOUT="1",
    )
    server = spawn(["serve"], env)
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)
    short = httpx.post(f"{base}/jobs", json={"type": "sleep", "payload": {"seconds": 1}}).json()
    answer = httpx.get(f"{base}/jobs/{short['id']}", params={"wait": 30}, timeout=40)
    job = answer.json()
    assert (answer.status_code, job["status"]) == (200, "completed")
    assert job["result"] == {"slept_seconds": 1.0}
    assert job["progress"]["fraction"] == 1.0
    assert job["progress"]["message"] == "slept 1s of 1s"

    long = httpx.post(f"{base}/jobs", json={"type": "sleep", "payload": {"seconds": 60}}).json()
    still = httpx.get(f"{base}/jobs/{long['id']}", params={"wait": 0.5}, timeout=40).json()
    assert still["status"] in ("pending", "running")  # the wait ran out: the job as it is
    bad = httpx.get(f"{base}/jobs/{long['id']}", params={"wait": 301})
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["field"] == "wait"
    assert httpx.get(f"{base}/jobs/999999", params={"wait": 1}).status_code == 404

    # A long-poll in flight when the server stops is answered, not dropped.
    poll = http.client.HTTPConnection("127.0.0.1", int(env["PORT"]), timeout=60)
    poll.request("GET", f"/jobs/{long['id']}?wait=300")
    wait_until_read(int(env["PORT"]), poll.sock.getsockname()[1])
    server.popen.terminate()
    answer = poll.getresponse()
    assert answer.status == 200
    assert json.loads(answer.read())["status"] in ("pending", "running", "cancelled")
    poll.close()
    assert server.popen.wait(30) == 0


def wait_until_read(server_port: int, client_port: int, timeout: float = 10) -> None:
    """Until the server has read all that the client on ``client_port`` sent: the
    kernel's receive queue of the server's end of that connection is empty. The request
    is then parsed and being answered, not bytes a stopping server could drop."""
    ends = (f"0100007F:{server_port:04X}", f"0100007F:{client_port:04X}")
    deadline = time.monotonic() + timeout
    while True:
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            local, remote, _, queues = line.split()[1:5]
            if (local, remote) == ends and queues.endswith(":00000000"):
                return
        assert time.monotonic() < deadline, "the server did not read the request"
        time.sleep(0.01)


async def test_fifty_concurrent_http_requests_with_one_idempotency_key(
    spawn: Spawn, env: dict[str, str], db: asyncpg.Connection, schema: str
) -> None:
    api = spawn(["api"], env, name="api")
    base = f"http://127.0.0.1:{env['PORT']}"
    api.wait_http(base)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        answers = await asyncio.gather(
            *(
                client.post("/jobs", json={"type": "x"}, headers={"Idempotency-Key": "order-7"})
                for _ in range(50)
            )
        )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * 49 + [201]
    assert len({a.json()["id"] for a in answers}) == 1
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".jobs') == 1


def curl(*args: str) -> tuple[int, dict[str, object]]:
    """curl's answer to a request: its status and JSON body."""
    run = subprocess.run(
        ["curl", "-s", "-w", "\n%{http_code}", *args], capture_output=True, text=True, timeout=30
    )
    body, _, status = run.stdout.rpartition("\n")
    return int(status), json.loads(body)


def test_curl_without_a_json_content_type_is_told_what_to_send(
    env: dict[str, str], spawn: Spawn
) -> None:
    api = spawn(["api"], env, name="api")
    base = f"http://127.0.0.1:{env['PORT']}"
    api.wait_http(base)
    job = '{"type": "send_email", "payload": {"to": "a@example.com"}}'
    # curl -d sends application/x-www-form-urlencoded unless told otherwise.
    status, answer = curl(f"{base}/jobs", "-d", job)
    assert status == 415
    assert answer == {
        "detail": [
            {
                "field": "Content-Type",
                "loc": ["header", "Content-Type"],
                "msg": "must be application/json, got 'application/x-www-form-urlencoded' "
                "(what curl -d sends unless told: add -H 'Content-Type: application/json', "
                "or use curl --json)",
                "type": "unsupported_media_type",
            }
        ]
    }
    status, answer = curl(f"{base}/workflows", "-d", '{"jobs": [{"ref": "a", "type": "x"}]}')
    assert status == 415
    assert httpx.get(f"{base}/jobs").json()["jobs"] == []
    # As the README and curl --json send it.
    status, answer = curl(f"{base}/jobs", "-H", "Content-Type: application/json", "-d", job)
    assert (status, answer["status"]) == (201, "pending")
    status, answer = curl(f"{base}/jobs", "--json", job)
    assert (status, answer["status"]) == (201, "pending")
    assert api.stop() == 0
