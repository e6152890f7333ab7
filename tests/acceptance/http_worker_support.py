"""What the tests of workers over HTTP share (test_http_workers.py, the clients' tests,
test_http_workers_mixed.py): a `jobqueue api` to talk to, a token's header, and the
moment a worker's first claim has begun."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.conftest import Process, Spawn


def start_api(spawn: Spawn, env: dict[str, str]) -> tuple[str, Process]:
    """A `jobqueue api` on env's PORT, once it answers: its base URL and process."""
    server = spawn(["api"], env, name="api")
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)
    return base, server


@pytest.fixture
def api(spawn: Spawn, env: dict[str, str]) -> tuple[str, Process]:
    return start_api(spawn, env)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def registered(client: httpx.AsyncClient, token: str, worker_id: str) -> None:
    """Once GET /workers shows ``worker_id``: its first claim has begun."""
    deadline = time.monotonic() + 30
    while worker_id not in [
        w["id"] for w in (await client.get("/workers", headers=auth(token))).json()
    ]:
        assert time.monotonic() < deadline, f"{worker_id} never claimed"
        await asyncio.sleep(0.05)
