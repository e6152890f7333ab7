"""The Idempotency-Key header of POST /jobs over a real `jobqueue serve`: a retry gets
the job its first request stored, even once that job completed; the key with another
body is refused; the maintenance leader forgets keys past JOBQUEUE_IDEMPOTENCY_TTL."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import httpx
import pytest

from tests.conftest import Spawn

pytestmark = pytest.mark.anyio


async def count(db: asyncpg.Connection, schema: str, table: str) -> int:
    return int(await db.fetchval(f'SELECT count(*) FROM "{schema}".{table}'))


async def test_a_retry_after_the_job_completed_gets_that_job_and_stores_nothing(
    spawn: Spawn, env: dict[str, str], db: asyncpg.Connection, schema: str
) -> None:
    env.update(JOBQUEUE_APP="jobqueue.demo:jq")
    server = spawn(["serve"], env)
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)
    body = {"type": "send_email", "payload": {"to": "a@example.com"}}
    key = "8e03978e-40d5-43e8-bc93-6894a57f9324"
    async with httpx.AsyncClient(base_url=base, timeout=40) as client:
        first = await client.post("/jobs", json=body, headers={"Idempotency-Key": f'"{key}"'})
        assert first.status_code == 201, first.text
        job = first.json()
        done = await client.get(f"/jobs/{job['id']}", params={"wait": 30})
        assert done.json()["status"] == "completed"

        # The same request, spelled otherwise, with the key bare (as older clients send it).
        retry = await client.post(
            "/jobs",
            content='{"payload": {"to": "a@example.com"}, "type": "send_email"}',
            headers={"Idempotency-Key": key, "Content-Type": "application/json"},
        )
        assert retry.status_code == 200, retry.text
        assert retry.headers["Location"] == f"/jobs/{job['id']}"
        assert (retry.json()["id"], retry.json()["status"]) == (job["id"], "completed")

        other = await client.post(
            "/jobs",
            json={**body, "payload": {"to": "b@example.com"}},
            headers={"Idempotency-Key": f'"{key}"'},
        )
        assert other.status_code == 422, other.text
        [error] = other.json()["detail"]
        assert error["field"] == "Idempotency-Key"
        assert error["type"] == "idempotency_key_reused"
        assert f"job {job['id']}" in error["msg"]
    assert await count(db, schema, "jobs") == 1
    assert await count(db, schema, "idempotency_keys") == 1


async def test_the_leader_forgets_a_key_after_its_ttl_and_the_key_stores_a_new_job(
    spawn: Spawn, env: dict[str, str], db: asyncpg.Connection, schema: str
) -> None:
    env.update(
        JOBQUEUE_APP="jobqueue.demo:jq",
        JOBQUEUE_IDEMPOTENCY_TTL="1s",
        JOBQUEUE_RESCUE_INTERVAL="0.2",  # the leader's round
    )
    server = spawn(["serve"], env)
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)
    headers = {"Idempotency-Key": '"order-12"'}
    async with httpx.AsyncClient(base_url=base, timeout=10) as client:
        first = await client.post("/jobs", json={"type": "noop"}, headers=headers)
        assert first.status_code == 201, first.text
        assert await count(db, schema, "idempotency_keys") == 1
        deadline = time.monotonic() + 20
        while await count(db, schema, "idempotency_keys"):
            assert time.monotonic() < deadline, "the expired key was not swept"
            await asyncio.sleep(0.1)
        again = await client.post("/jobs", json={"type": "noop"}, headers=headers)
    assert again.status_code == 201, again.text
    assert again.json()["id"] != first.json()["id"]
    assert await count(db, schema, "jobs") == 2
