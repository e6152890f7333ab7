"""Retry policies at work, a handler's own decisions (RetryAt, Discard), and the attempt history
a dead letter keeps."""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from jobqueue import Discard, JobContext, RetryAt
from jobqueue.app import JobQueue
from jobqueue.model.job import JobStatus
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio


async def test_a_task_policy_sets_the_wait_between_attempts(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    starts: list[float] = []

    @jq.task("custom", max_attempts=3, retry=lambda attempt: 0.3 * attempt)
    async def custom(payload: dict[str, Any]) -> None:
        starts.append(time.monotonic())
        raise RuntimeError("again")

    job = await jq.enqueue("custom")
    await start_worker(retry_delay=60)  # the default policy would wait a minute
    assert (await jq.wait(job.id, timeout=15)).attempts == 3
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert 0.3 <= gaps[0] < 5, gaps
    assert 0.6 <= gaps[1] < 5, gaps


async def test_retry_at_runs_the_job_again_at_the_time_the_handler_gives(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    starts: list[float] = []

    @jq.task("later", max_attempts=2)
    async def later(payload: dict[str, Any], ctx: JobContext) -> None:
        starts.append(time.monotonic())
        if ctx.attempt == 1:
            raise RetryAt("rate limited", at=datetime.now(UTC) + timedelta(seconds=0.5))

    job = await jq.enqueue("later")
    await start_worker(retry_delay=60)
    done = await jq.wait(job.id, timeout=15)
    assert (done.status, done.attempts) == (JobStatus.COMPLETED, 2)
    assert 0.45 <= starts[1] - starts[0] < 5
    first, second = await jq.attempts(job.id)
    assert (first.attempt, first.error) == (1, "rate limited")
    assert (second.attempt, second.error) == (2, None)


async def test_discard_fails_the_job_at_once_whatever_attempts_are_left(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("hopeless", max_attempts=5)
    async def hopeless(payload: dict[str, Any]) -> None:
        raise Discard("customer 7 no longer exists")

    job = await jq.enqueue("hopeless")
    await start_worker(retry_delay=0)
    done = await jq.wait(job.id, timeout=15)
    assert (done.status, done.attempts) == (JobStatus.FAILED, 1)
    assert done.last_error == "discarded: customer 7 no longer exists"


async def test_a_dead_letter_keeps_every_attempt_with_its_traceback(
    jq: JobQueue, start_worker: StartWorker, api_client: httpx.AsyncClient
) -> None:
    @jq.task("flaky", max_attempts=3)
    def flaky(payload: dict[str, Any], ctx: JobContext) -> None:
        time.sleep(0.05)
        raise ValueError(f"boom on attempt {ctx.attempt}")

    job = await jq.enqueue("flaky")
    worker = await start_worker(retry_delay=0)
    done = await jq.wait(job.id, timeout=15)
    assert done.status == JobStatus.FAILED
    history = await jq.attempts(job.id)
    assert [a.attempt for a in history] == [1, 2, 3]
    assert [a.error for a in history] == [f"ValueError: boom on attempt {n}" for n in (1, 2, 3)]
    for a in history:
        assert a.worker_id == worker.id
        assert a.traceback is not None
        assert 'raise ValueError(f"boom on attempt' in a.traceback
        assert a.seconds is not None
        assert 0.04 <= a.seconds < 5

    body = (await api_client.get(f"/jobs/{job.id}/attempts")).json()
    assert [a["error"] for a in body["attempts"]] == [a.error for a in history]
    assert body["attempts"][0]["worker_id"] == worker.id
    assert body["attempts"][0]["seconds"] == pytest.approx(history[0].seconds)
    assert (await api_client.get("/jobs/999999/attempts")).status_code == 404
