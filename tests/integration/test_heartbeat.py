"""The heartbeat renews the leases of the jobs a worker runs, and warns when one was
taken from it (a rescue gave the job to another attempt), never for a job that
merely ended while the beat was on its way."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg
import pytest

from jobqueue.app import JobQueue
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio

NOT_RENEWED = "not renewed: the job was taken from this worker"


async def test_a_busy_drain_logs_no_lease_warning(
    jq: JobQueue, start_worker: StartWorker, caplog: pytest.LogCaptureFixture
) -> None:
    @jq.task("brief")
    async def brief(payload: dict[str, Any]) -> None:
        await asyncio.sleep(0.005)

    n = 20_000
    await jq.enqueue_many("brief", [{}] * n)
    with caplog.at_level(logging.WARNING, "jobqueue"):
        # A beat every 0.1 s, while jobs end by the hundred during each beat: before the
        # beat renewed only what still ran, this logged about 180 false warnings.
        worker = await start_worker(worker_count=256, lease_seconds=0.3, rescue_interval=60)
        done = 0
        while done < n:
            done += await worker.completer.signals.flushed.wait(timeout=60)
        beats = await worker.heartbeat.signals.beat.times(1)
    assert (await jq.queue("default")).completed == n
    assert beats
    warned = [r.getMessage() for r in caplog.records if NOT_RENEWED in r.getMessage()]
    assert warned == []


async def test_a_lease_taken_while_the_job_runs_is_warned_of(
    jq: JobQueue,
    start_worker: StartWorker,
    db: asyncpg.Connection,
    schema: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = asyncio.Event()

    @jq.task("long")
    async def long(payload: dict[str, Any]) -> None:
        await release.wait()

    job = await jq.enqueue("long")
    with caplog.at_level(logging.WARNING, "jobqueue"):
        worker = await start_worker(lease_seconds=0.3, rescue_interval=60)
        assert await worker.executor.signals.started.wait() == job.id
        # As a rescue does: the job now belongs to another worker's attempt.
        await db.execute(
            f"""UPDATE "{schema}".jobs SET worker_id = 'thief', attempts = attempts + 1
                WHERE id = $1""",
            job.id,
        )
        worker.heartbeat.signals.beat.clear()
        await worker.heartbeat.signals.beat.wait()
        release.set()
    warned = [r.getMessage() for r in caplog.records if NOT_RENEWED in r.getMessage()]
    assert warned[:1] == [f"Lease of job {job.id} attempt 1 {NOT_RENEWED} job_id={job.id}"]
