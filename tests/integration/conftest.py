"""Fixtures for tests against a real PostgreSQL in this process: a worker, the HTTP API
over ASGI."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from jobqueue.app import JobQueue
from jobqueue.job import FINAL_STATES, Job
from jobqueue.worker import Worker

StartWorker = Callable[..., Awaitable[Worker]]


@pytest.fixture
async def start_worker(jq: JobQueue) -> AsyncIterator[StartWorker]:
    workers: list[Worker] = []

    async def start(**overrides: Any) -> Worker:
        settings = dataclasses.replace(jq.settings, **overrides)
        worker = Worker(await jq.pool(), jq.dsn, settings, jq.tasks)
        await worker.start()
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        await worker.stop(asyncio.Event())


async def wait_final(jq: JobQueue, job_id: int, timeout: float = 15) -> Job:
    deadline = time.monotonic() + timeout
    while True:
        job = await jq.get(job_id)
        assert job is not None
        if job.status in FINAL_STATES:
            return job
        assert time.monotonic() < deadline, f"job {job_id} still {job.status}"
        await asyncio.sleep(0.02)


@pytest.fixture
async def api_client(jq: JobQueue) -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP API of ``jq`` in-process (no worker, any job type accepted). Behaviour
    that depends on a real server (signals, concurrency) uses ``spawn`` instead."""
    from jobqueue.api import create_app

    app = create_app(jq, check_types=False)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        yield client


def add_ok_and_bad_tasks(jq: JobQueue) -> None:
    """Two tasks: "ok" succeeds, "bad" fails on its only attempt."""

    @jq.task("ok")
    async def ok(payload: dict[str, Any]) -> None:
        pass

    @jq.task("bad", max_attempts=1)
    async def bad(payload: dict[str, Any]) -> None:
        raise RuntimeError("no")
