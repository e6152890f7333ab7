"""Cancellation: a pending job at once; a running one is stopped by its worker (async
cancelled, sync told, isolated killed) and ends cancelled, never retried; in bulk; from
Python and over HTTP (the CLI's in acceptance/test_cli.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from jobqueue import JobContext
from jobqueue.app import JobQueue
from jobqueue.db.store import Store
from jobqueue.model.job import JobNotFound, JobStateError, JobStatus
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio


async def test_a_pending_job_is_cancelled_at_once_and_never_runs(
    jq: JobQueue, start_worker: StartWorker, api_client: httpx.AsyncClient
) -> None:
    ran: list[int] = []

    @jq.task("x")
    async def x(payload: dict[str, Any], ctx: JobContext) -> None:
        ran.append(ctx.id)

    job = await jq.enqueue("x")  # due: a worker's first claim pass would take it
    answer = await api_client.post(f"/jobs/{job.id}/cancel")
    assert answer.status_code == 200
    assert answer.json()["status"] == "cancelled"
    assert (await api_client.post(f"/jobs/{job.id}/cancel")).status_code == 200  # idempotent
    worker = await start_worker()
    assert await worker.producer.signals.polled.wait() == 0  # that pass claims nothing
    assert ran == []
    assert (await jq.queue("default")).cancelled == 1


async def test_a_running_async_job_is_cancelled_by_its_worker_and_not_retried(
    jq: JobQueue, start_worker: StartWorker, api_client: httpx.AsyncClient
) -> None:
    started, stopped = asyncio.Event(), asyncio.Event()

    @jq.task("long", max_attempts=5)
    async def long(payload: dict[str, Any]) -> None:
        if started.is_set():
            return  # run again, once retried by hand: done at once
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            stopped.set()

    job = await jq.enqueue("long")
    await start_worker(retry_delay=0)
    await asyncio.wait_for(started.wait(), 10)
    began = time.monotonic()
    answer = await api_client.post(f"/jobs/{job.id}/cancel")
    assert answer.status_code == 202
    assert answer.json()["cancel_requested_at"] is not None
    await asyncio.wait_for(stopped.wait(), 5)  # woken by NOTIFY, not a heartbeat later
    done = await jq.wait(job.id, timeout=15)
    assert time.monotonic() - began < 2
    assert (done.status, done.attempts) == (JobStatus.CANCELLED, 1)
    assert done.last_error == "cancelled while running"
    retried = await api_client.post(f"/jobs/{job.id}/retry")
    assert retried.status_code == 200  # a cancelled job may be retried by hand
    assert (await jq.wait(job.id, timeout=15)).status == JobStatus.COMPLETED


async def test_a_sync_handler_sees_the_flag_and_the_job_ends_cancelled(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    started = threading.Event()

    @jq.task("sync_long", max_attempts=3)
    def sync_long(payload: dict[str, Any], ctx: JobContext) -> None:
        started.set()
        deadline = time.monotonic() + 30
        while not ctx.cancel_requested and time.monotonic() < deadline:
            time.sleep(0.01)

    job = await jq.enqueue("sync_long")
    await start_worker()
    await asyncio.to_thread(started.wait, 10)
    await jq.cancel(job.id)
    done = await jq.wait(job.id, timeout=10)
    assert (done.status, done.attempts) == (JobStatus.CANCELLED, 1)


async def test_a_missed_notify_is_caught_by_the_heartbeat(
    jq: JobQueue, start_worker: StartWorker, db: asyncpg.Connection, schema: str
) -> None:
    started = asyncio.Event()

    @jq.task("long")
    async def long(payload: dict[str, Any]) -> None:
        started.set()
        await asyncio.sleep(60)

    job = await jq.enqueue("long")
    await start_worker(lease_seconds=1.5)  # a heartbeat every 0.5 s
    await asyncio.wait_for(started.wait(), 10)
    # As if the NOTIFY was lost: the request is only in the row.
    await db.execute(
        f'UPDATE "{schema}".jobs SET cancel_requested_at = now() WHERE id = $1', job.id
    )
    done = await jq.wait(job.id, timeout=5)
    assert done.status == JobStatus.CANCELLED


async def test_cancel_conflicts_and_bulk_cancel(
    jq: JobQueue, api_client: httpx.AsyncClient, db: asyncpg.Connection, schema: str
) -> None:
    done = await db.fetchval(
        f"""INSERT INTO "{schema}".jobs (type, status, finished_at)
            VALUES ('x', 'completed', now()) RETURNING id"""
    )
    conflict = await api_client.post(f"/jobs/{done}/cancel")
    assert conflict.status_code == 409
    assert conflict.json()["status"] == "completed"
    with pytest.raises(JobStateError):
        await jq.cancel(done)
    with pytest.raises(JobNotFound):
        await jq.cancel(10**9)

    await jq.enqueue_many("mail", [{}] * 5, queue="mail")
    await jq.enqueue_many("other", [{}] * 2)
    await db.execute(
        f"""UPDATE "{schema}".jobs SET status = 'running', attempts = 1, worker_id = 'w'
            WHERE id = (SELECT min(id) FROM "{schema}".jobs WHERE queue = 'mail')"""
    )
    answer = await api_client.post("/jobs/cancel", json={"queue": "mail"})
    assert answer.json() == {"cancelled": 4, "requested": 1}
    assert (await api_client.post("/jobs/cancel", json={"queue": "mail"})).json() == {
        "cancelled": 0,
        "requested": 0,
    }
    left = await db.fetchval(f"""SELECT count(*) FROM "{schema}".jobs WHERE status = 'pending'""")
    assert left == 2


async def test_a_running_isolated_job_is_killed(
    jq: JobQueue, start_worker: StartWorker, tmp_path: Path
) -> None:
    from tests.apps import poison_app

    jq.tasks["isolated_spin"] = poison_app.jq.tasks["isolated_spin"]
    spinning = tmp_path / "spinning"
    job = await jq.enqueue("isolated_spin", {"started": str(spinning)})
    await start_worker()
    deadline = time.monotonic() + 10
    while not spinning.exists():  # only the child process can tell it runs
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    await jq.cancel(job.id)
    done = await jq.wait(job.id, timeout=10)
    assert done.status == JobStatus.CANCELLED


async def test_a_cancel_during_a_claim_waits_for_it_and_asks_the_job_to_stop(
    jq: JobQueue, db: asyncpg.Connection, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim holds its jobs' rows until it commits; a cancel of one of them at that
    instant used to pass over it (SKIP LOCKED), change nothing, and answer anyway."""
    # What each cancel statement changed: the test waits until one has passed over the
    # locked row (a sample of pg_stat_activity would catch that instant only by luck).
    changed: list[int] = []
    cancel_jobs = Store.cancel_jobs

    async def counted(self: Store, **kwargs: Any) -> Any:
        rows = await cancel_jobs(self, **kwargs)
        changed.append(len(rows))
        return rows

    monkeypatch.setattr(Store, "cancel_jobs", counted)
    job = await jq.enqueue("report", {})
    async with db.transaction():  # a claim of the job, in flight
        await db.execute(
            f"""UPDATE "{schema}".jobs SET status = 'running', attempts = 1, worker_id = 'w',
                       started_at = now(), lease_expires_at = now() + interval '30 s'
                WHERE id = $1""",
            job.id,
        )
        cancelling = asyncio.ensure_future(jq.cancel(job.id))
        deadline = time.monotonic() + 10
        while len(changed) < 3:  # several of its tries
            assert time.monotonic() < deadline, "the cancel never met the claim's lock"
            await asyncio.sleep(0.01)
        assert set(changed) == {0}  # each passed over the locked row
        assert not cancelling.done(), cancelling.result()
    asked = await cancelling
    assert (asked.status, asked.cancel_requested_at is not None) == (JobStatus.RUNNING, True)
    stored = await jq.get(job.id)
    assert stored is not None
    assert stored.cancel_requested_at is not None
