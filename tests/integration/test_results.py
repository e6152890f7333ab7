"""Results, jq.wait and progress, against a real worker and database."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, cast

import asyncpg
import pytest
from pydantic import BaseModel

from jobqueue import waiter
from jobqueue.app import JobQueue
from jobqueue.context import JobContext
from jobqueue.db.records import ClaimedJob, ProgressReport
from jobqueue.db.store import Store
from jobqueue.model.job import JobNotFound, JobStatus
from jobqueue.testing import drain
from jobqueue.worker.progress import ProgressWriter
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio


class Receipt(BaseModel):
    number: int
    total: float


async def test_return_values_are_stored_with_the_job(jq: JobQueue) -> None:
    jq.settings = dataclasses.replace(jq.settings, max_result_bytes=1000)

    @jq.task("plain")
    async def plain(payload: dict[str, Any]) -> Any:
        return payload["value"]

    @jq.task("model")
    def model(payload: dict[str, Any]) -> Receipt:  # sync: from the thread pool
        return Receipt(number=7, total=12.5)

    @jq.task("nothing")
    async def nothing(payload: dict[str, Any]) -> None:
        pass

    @jq.task("opaque", max_attempts=3)
    async def opaque(payload: dict[str, Any]) -> object:
        return object()

    @jq.task("ratio", max_attempts=3)
    async def ratio(payload: dict[str, Any]) -> dict[str, Any]:
        return {"ratio": [1.0, float(payload["value"])]}

    @jq.task("nul", max_attempts=3)
    async def nul(payload: dict[str, Any]) -> dict[str, str]:
        return {"text": "a" + chr(0) + "b"}  # no payload can carry it: jsonb refuses it

    @jq.task("bad_model", max_attempts=3)
    def bad_model(payload: dict[str, Any]) -> Receipt:
        return Receipt(number=1, total=float("nan"))

    ids = {
        "dict": (await jq.enqueue("plain", {"value": {"a": [1, 2]}})).id,
        "text": (await jq.enqueue("plain", {"value": "done"})).id,
        "big": (await jq.enqueue("plain", {"value": "x" * 2000})).id,
        "model": (await jq.enqueue("model")).id,
        "none": (await jq.enqueue("nothing")).id,
        "opaque": (await jq.enqueue("opaque")).id,
        "nan": (await jq.enqueue("ratio", {"value": "nan"})).id,
        "inf": (await jq.enqueue("ratio", {"value": "-inf"})).id,
        "bad_model": (await jq.enqueue("bad_model")).id,
        "nul": (await jq.enqueue("nul")).id,
    }
    jobs = {job.id: job for job in await drain(jq)}
    got = {name: jobs[i] for name, i in ids.items()}
    assert got["dict"].result == {"a": [1, 2]}
    assert got["text"].result == "done"
    assert got["model"].result == {"number": 7, "total": 12.5}
    assert got["none"].result is None
    assert got["none"].status == JobStatus.COMPLETED
    # A result that cannot be stored fails the job at once: another attempt would
    # produce the same value.
    assert (got["big"].status, got["big"].attempts) == (JobStatus.FAILED, 1)
    assert got["big"].last_error == (
        "discarded: result is 2002 bytes; the limit is 1000 (JOBQUEUE_MAX_RESULT_BYTES)"
    )
    assert (got["opaque"].status, got["opaque"].attempts) == (JobStatus.FAILED, 1)
    assert got["opaque"].last_error is not None
    assert got["opaque"].last_error.startswith("discarded: result is not JSON-serialisable")
    # NaN and Infinity are no JSON: the job fails as for any result that cannot be
    # stored, rather than storing null or failing the write of other jobs' outcomes.
    for name, where in (("nan", "result.ratio.1: nan"), ("inf", "result.ratio.1: -inf"),
                        ("bad_model", "result.total: nan")):  # fmt: skip
        assert (got[name].status, got[name].attempts, got[name].result) == (
            JobStatus.FAILED, 1, None
        )  # fmt: skip
        assert got[name].last_error == (
            f"discarded: result is not JSON-serialisable: {where} is not a JSON number"
        )
    # Text jsonb refuses, written with the other outcomes, would fail them all.
    assert (got["nul"].status, got["nul"].attempts) == (JobStatus.FAILED, 1)
    assert got["nul"].last_error == (
        "discarded: result cannot be stored: result.text: must not contain the NUL "
        "character (\\u0000)"
    )
    assert (await jq.get(ids["dict"])) == got["dict"]


async def test_wait_is_woken_by_the_database_not_by_polling(
    jq: JobQueue, start_worker: StartWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the fallback read an hour away, only the done channel can wake a wait.
    monkeypatch.setattr(waiter, "FALLBACK_SECONDS", 3600.0)
    release = asyncio.Event()

    @jq.task("gated")
    async def gated(payload: dict[str, Any]) -> dict[str, int]:
        await release.wait()
        return {"n": payload["n"]}

    @jq.task("broken", max_attempts=1)
    async def broken(payload: dict[str, Any]) -> None:
        raise RuntimeError("no luck")

    ok = await jq.enqueue("gated", {"n": 1})
    bad = await jq.enqueue("broken")
    later = await jq.enqueue("gated", {"n": 2}, delay_seconds=3600)
    await start_worker()
    waiting = (await jq.waiter()).signals.waiting  # a wait read its job, not final yet
    waiting.arm()
    waits = asyncio.gather(jq.wait(ok.id, timeout=20), jq.wait(bad.id, timeout=20))
    await waiting.wait_for(lambda job_id: job_id == ok.id)
    assert not waits.done()  # the gated job is still running
    release.set()
    done, failed = await waits
    assert (done.status, done.result) == (JobStatus.COMPLETED, {"n": 1})
    assert (failed.status, failed.last_error) == (JobStatus.FAILED, "RuntimeError: no luck")

    cancelling = asyncio.ensure_future(jq.wait(later.id, timeout=20))
    await waiting.wait_for(lambda job_id: job_id == later.id)
    await jq.cancel(later.id)  # a pending job cancelled is announced too
    assert (await cancelling).status == JobStatus.CANCELLED
    assert (await jq.wait(ok.id, timeout=0.01)) == done  # already final: at once


async def test_wait_timeout_unknown_job_and_fallback(
    jq: JobQueue, db: asyncpg.Connection, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await jq.enqueue("nobody_runs_this")
    with pytest.raises(TimeoutError):
        await jq.wait(job.id, timeout=0.3)
    with pytest.raises(JobNotFound):
        await jq.wait(10**9, timeout=5)
    # An end nobody announced (here, a direct UPDATE) is found by the fallback read.
    monkeypatch.setattr(waiter, "FALLBACK_SECONDS", 0.2)
    read = (await jq.waiter()).signals.waiting
    read.arm()
    waiting = asyncio.ensure_future(jq.wait(job.id, timeout=20))
    await read.wait_for(lambda job_id: job_id == job.id)  # pending: the wait sleeps
    await db.execute(
        f"UPDATE \"{schema}\".jobs SET status = 'completed', finished_at = now() WHERE id = $1",
        job.id,
    )
    assert (await waiting).status == JobStatus.COMPLETED


def test_wait_sync(jq_sync: JobQueue) -> None:
    job = jq_sync.enqueue_sync("nobody_runs_this")
    with pytest.raises(TimeoutError):
        jq_sync.wait_sync(job.id, timeout=0.2)


@pytest.fixture
def jq_sync(settings: Any) -> Any:
    jq = JobQueue(settings=settings)
    yield jq
    jq.close_sync()


async def test_progress_shows_while_running_and_is_rate_limited(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    jq.settings = dataclasses.replace(jq.settings, progress_interval=0.3)
    finish = threading.Event()
    reports = 0

    @jq.task("import_rows")
    def import_rows(payload: dict[str, Any], ctx: JobContext) -> str:
        nonlocal reports
        started = time.monotonic()
        while not finish.is_set():  # a sync handler, reporting in a tight loop
            reports += 1
            ctx.progress(min(1.0, reports / 10**6), f"rows {reports}")
        return f"{time.monotonic() - started}"

    job = await jq.enqueue("import_rows")
    await start_worker()
    seen: set[Any] = set()
    deadline = time.monotonic() + 15
    try:
        while len(seen) < 3:  # progress appears, and moves, while the job runs
            current = await jq.get(job.id)
            assert current is not None
            assert current.status in (JobStatus.PENDING, JobStatus.RUNNING)
            if current.progress is not None:
                assert current.progress.fraction is not None
                rows = round(current.progress.fraction * 10**6)
                assert current.progress.message == f"rows {rows}"
                seen.add(current.progress.updated_at)
            assert time.monotonic() < deadline, seen
            await asyncio.sleep(0.01)
    finally:
        finish.set()
    ended = await jq.wait(job.id, timeout=15)
    ran = float(ended.result)
    assert ended.progress is not None
    # Hundreds of thousands of reports, merged into at most one write per interval.
    assert reports > 1000
    assert len(seen) <= ran / 0.3 + 2


async def test_progress_of_a_stale_attempt_is_not_written(jq: JobQueue) -> None:
    job = await jq.enqueue("nobody_runs_this")
    writer = ProgressWriter(await jq.store(), "some-worker", 0.1)
    # Not claimed by "some-worker", nor on attempt 1: fenced out.
    writer.report(ClaimedJob(job.id, job.type, job.queue, {}, 1, 3, 0, job.run_at), 0.5, "half")
    await writer.flush()
    stored = await jq.get(job.id)
    assert stored is not None
    assert stored.progress is None
    claimed = ClaimedJob(job.id, job.type, job.queue, {}, 1, 3, 0, job.run_at)
    for fraction in (1.5, float("nan"), float("inf")):  # jsonb has no NaN nor Infinity
        with pytest.raises(ValueError, match="fraction must be a finite number from 0 to 1"):
            writer.report(claimed, fraction, None)


class HeldFirstWrite:
    """A store whose first progress write waits until a second write begins (or half a
    second passes), as a slow connection would, before it writes."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._second_began = asyncio.Event()
        self.first_began = asyncio.Event()
        self.writes = 0

    async def progress(self, *, reports: Sequence[ProgressReport], worker_id: str) -> int:
        self.writes += 1
        if self.writes == 1:
            self.first_began.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._second_began.wait(), 0.5)
        else:
            self._second_began.set()
        return await self._store.progress(reports=reports, worker_id=worker_id)


async def held_writer(jq: JobQueue) -> tuple[ClaimedJob, HeldFirstWrite, ProgressWriter]:
    """A job "some-worker" holds, and a progress writer whose first write is held."""
    job = await jq.enqueue("reports")
    store = await jq.store()
    [claimed] = await store.claim(
        queue=job.queue, limit=1, worker_id="some-worker", lease_seconds=60
    )
    held = HeldFirstWrite(store)
    return claimed, held, ProgressWriter(cast(Store, held), "some-worker", 3600.0)


async def test_an_older_report_never_lands_over_a_newer_one(jq: JobQueue) -> None:
    claimed, held, writer = await held_writer(jq)
    writer.report(claimed, 0.1, "started")
    older = asyncio.create_task(writer.flush())
    await held.first_began.wait()  # the older report is taken, and its write held
    writer.report(claimed, 0.7, "almost")
    settling = writer.settle(claimed.id)
    assert settling is not None
    await settling  # what a worker awaits before it writes the job's outcome
    await older
    stored = await jq.get(claimed.id)
    assert stored is not None
    assert stored.progress is not None
    assert (stored.progress.fraction, stored.progress.message) == (0.7, "almost")
    assert held.writes == 2


async def test_a_report_being_written_is_awaited_before_the_outcome(jq: JobQueue) -> None:
    claimed, held, writer = await held_writer(jq)
    writer.report(claimed, 0.7, "almost")
    writing = asyncio.create_task(writer.flush())
    await held.first_began.wait()  # taken by that write, which is held: none left unwritten
    settling = writer.settle(claimed.id)
    assert settling is not None  # else the outcome could commit first and fence it out
    await settling
    assert writing.done()
    stored = await jq.get(claimed.id)
    assert stored is not None
    assert stored.progress is not None
    assert stored.progress.fraction == 0.7
    assert held.writes == 1  # the settle had nothing of its own to write


async def test_context_log_is_bound_to_the_job(
    jq: JobQueue, caplog: pytest.LogCaptureFixture
) -> None:
    @jq.task("chatty")
    def chatty(payload: dict[str, Any], ctx: JobContext) -> None:
        ctx.log.info("step one done", rows=3)

    job = await jq.enqueue("chatty")
    with caplog.at_level(logging.INFO, "jobqueue.job"):
        await drain(jq)
    [line] = [r.getMessage() for r in caplog.records if "step one done" in r.getMessage()]
    assert f"job_id={job.id}" in line
    assert "type=chatty" in line
    assert "attempt=1" in line
    assert "rows=3" in line


async def test_an_ended_attempt_shows_its_last_report(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    first_write: asyncio.Future[int]

    @jq.task("stumbles", max_attempts=1)
    async def stumbles(payload: dict[str, Any], ctx: JobContext) -> None:
        ctx.progress(0.1, "started")
        # Written at once; then an hour between writes: only the write at the attempt's
        # end can show 0.7.
        await first_write
        ctx.progress(0.7, "almost")
        if payload["fail"]:
            raise RuntimeError("tripped")

    worker = await start_worker(progress_interval=3600.0, worker_count=2)
    first_write = asyncio.ensure_future(worker.progress.signals.written.wait())
    failed = await jq.enqueue("stumbles", {"fail": True})
    done = await jq.enqueue("stumbles", {"fail": False})
    for job_id, status in ((failed.id, JobStatus.FAILED), (done.id, JobStatus.COMPLETED)):
        ended = await jq.wait(job_id, timeout=15)
        progress = ended.progress
        assert ended.status == status
        assert progress is not None
        assert (progress.fraction, progress.message) == (0.7, "almost")
