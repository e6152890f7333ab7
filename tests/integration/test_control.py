"""Operators acting on jobs: manual retry (one, or by filter), from Python and over HTTP
(the CLI's in acceptance/test_cli.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from jobqueue import JobContext
from jobqueue.app import JobQueue
from jobqueue.model.job import JobNotFound, JobStateError, JobStatus
from tests.conftest import dead_letters
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio


async def test_a_retried_dead_letter_runs_again_with_fresh_attempts(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    fixed = False

    @jq.task("flaky", max_attempts=2)
    async def flaky(payload: dict[str, Any], ctx: JobContext) -> None:
        if not fixed:
            raise RuntimeError(f"down on attempt {ctx.attempt}")

    job = await jq.enqueue("flaky")
    await start_worker(retry_delay=0)
    assert (await jq.wait(job.id, timeout=15)).status == JobStatus.FAILED
    fixed = True
    retried = await jq.retry(job.id)
    assert (retried.status, retried.attempts, retried.last_error) == (JobStatus.PENDING, 0, None)
    done = await jq.wait(job.id, timeout=15)
    assert (done.status, done.attempts) == (JobStatus.COMPLETED, 1)
    # The history keeps the attempts before the retry, then the one that completed.
    assert [(a.attempt, a.error) for a in await jq.attempts(job.id)] == [
        (1, "RuntimeError: down on attempt 1"),
        (2, "RuntimeError: down on attempt 2"),
        (1, None),
    ]
    with pytest.raises(JobStateError, match=f"cannot retry job {job.id}: it is completed"):
        await jq.retry(job.id)
    with pytest.raises(JobNotFound):
        await jq.retry(10**9)


async def test_retry_over_http_and_its_conflicts(
    jq: JobQueue, api_client: httpx.AsyncClient, db: asyncpg.Connection, schema: str
) -> None:
    [failed] = await dead_letters(db, schema, [("report", "default", 1)])
    pending = await jq.enqueue("report")

    ok = await api_client.post(f"/jobs/{failed}/retry")
    assert ok.status_code == 200
    assert (ok.json()["status"], ok.json()["attempts"]) == ("pending", 0)

    conflict = await api_client.post(f"/jobs/{pending.id}/retry")
    assert conflict.status_code == 409
    assert conflict.json() == {
        "detail": f"cannot retry job {pending.id}: it is pending; only failed or cancelled "
        "jobs can be",
        "status": "pending",
    }
    missing = await api_client.post("/jobs/999999999/retry")
    assert (missing.status_code, missing.json()) == (404, {"detail": "job 999999999 not found"})


async def test_bulk_retry_takes_exactly_the_jobs_matching_every_filter(
    jq: JobQueue, api_client: httpx.AsyncClient, db: asyncpg.Connection, schema: str
) -> None:
    ids = await dead_letters(
        db,
        schema,
        [("mail", "a", 1), ("mail", "a", 30), ("mail", "b", 1), ("sms", "a", 1)],
    )
    since = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    answer = await api_client.post(
        "/jobs/retry", json={"type": "mail", "queue": "a", "finished_after": since}
    )
    assert (answer.status_code, answer.json()) == (200, {"retried": 1})
    states = {
        r["id"]: r["status"] for r in await db.fetch(f'SELECT id, status FROM "{schema}".jobs')
    }
    assert states == {ids[0]: "pending", ids[1]: "failed", ids[2]: "failed", ids[3]: "failed"}

    bad = await api_client.post("/jobs/retry", json={"statuses": ["completed"]})
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["field"] == "statuses.0"
    assert (await api_client.post("/jobs/retry", json={})).json() == {"retried": 3}


async def test_bulk_retry_goes_in_batches(
    jq: JobQueue, db: asyncpg.Connection, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("jobqueue.control.BATCH", 7)
    await dead_letters(db, schema, [("mail", "a", 1)] * 30)
    assert await jq.retry_many(type="mail") == 30
    assert (
        await db.fetchval(f"""SELECT count(*) FROM "{schema}".jobs WHERE status = 'pending'""")
        == 30
    )
