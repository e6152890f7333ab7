"""Per-job logs: what a handler logs is kept with its attempt, bounded, written in
batches fenced by attempt, and shown by GET /jobs/{id}/attempts and `jobqueue jobs logs`."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
from typing import Any

import asyncpg
import httpx
import pytest

from jobqueue.app import JobQueue
from jobqueue.context import JobContext
from jobqueue.db.sql import queries
from tests.conftest import jobqueue
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio

MARKER = "[jobqueue] log truncated: more than {} bytes (JOBQUEUE_JOB_LOG_BYTES)\n"


def lines(log: str | None) -> list[str]:
    """A log's lines without their time and level: ``"<event> <fields>"``."""
    return [line.split(" ", 2)[2] for line in (log or "").splitlines()]


async def test_each_attempt_keeps_its_own_lines_shown_by_the_api_and_the_cli(
    jq: JobQueue, start_worker: StartWorker, api_client: httpx.AsyncClient, env: dict[str, str]
) -> None:
    @jq.task("flaky", max_attempts=2)
    async def flaky(payload: dict[str, Any], ctx: JobContext) -> None:
        for i in range(3):
            ctx.log.info("step", n=i, attempt_seen=ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")

    await start_worker(retry_delay=0.01)
    job = await jq.enqueue("flaky", {})
    done = await jq.wait(job.id, timeout=20)
    assert (done.status, done.attempts) == ("completed", 2)

    answer = await api_client.get(f"/jobs/{job.id}/attempts")
    assert answer.status_code == 200
    first, second = answer.json()["attempts"]
    assert (first["attempt"], first["error"], first["log_truncated"]) == (
        1,
        "RuntimeError: first attempt fails",
        False,
    )
    assert lines(first["log"]) == [f"step n={i} attempt_seen=1" for i in range(3)]
    assert (second["attempt"], second["error"], second["finished_at"] is not None) == (
        2,
        None,
        True,
    )
    assert lines(second["log"]) == [f"step n={i} attempt_seen=2" for i in range(3)]
    assert first["log"].split(" ", 2)[1] == "info"

    shown = jobqueue(env, "jobs", "logs", str(job.id))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == f"--- attempt 1\n{first['log']}--- attempt 2\n{second['log']}"
    only = jobqueue(env, "jobs", "logs", str(job.id), "--attempt", "2")
    assert (only.returncode, only.stdout) == (0, second["log"])

    missing = jobqueue(env, "jobs", "logs", "999999")
    assert missing.returncode != 0
    assert missing.stdout == ""
    assert len(missing.stderr.strip().splitlines()) == 1
    assert "999999" in missing.stderr
    bad = jobqueue(env, "jobs", "logs", str(job.id), "--attempt", "0")
    assert bad.returncode != 0
    assert bad.stderr.strip().splitlines() == [
        "jobqueue: error: --attempt must be a positive integer, got 0"
    ]


async def test_a_log_is_cut_at_the_bound_and_ends_with_the_marker(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("chatty")
    def chatty(payload: dict[str, Any], ctx: JobContext) -> None:  # sync: in a thread
        for i in range(1024):
            ctx.log.info(f"{i:04d} " + "x" * 1019)  # 1 MiB in all, with the line prefixes

    await start_worker(job_log_bytes=64 * 1024)
    job = await jq.enqueue("chatty", {})
    assert (await jq.wait(job.id, timeout=20)).status == "completed"

    [attempt] = await jq.attempts(job.id)
    assert attempt.log is not None
    assert attempt.log_truncated
    kept, marker = attempt.log.removesuffix("\n").rsplit("\n", 1)
    assert marker + "\n" == MARKER.format(64 * 1024)
    assert len((kept + "\n").encode()) == 64 * 1024 + 1  # cut at the bound, then a newline
    assert lines(kept)[0].startswith("0000 xxx")
    assert [line.split()[2] for line in kept.splitlines()[:-1]] == [
        f"{i:04d}" for i in range(len(kept.splitlines()) - 1)
    ]


async def test_follow_prints_a_running_jobs_lines_and_exits_when_it_ends(
    jq: JobQueue, start_worker: StartWorker, env: dict[str, str]
) -> None:
    gate = asyncio.Event()

    @jq.task("slow")
    async def slow(payload: dict[str, Any], ctx: JobContext) -> None:
        ctx.log.info("first")
        await gate.wait()
        ctx.log.info("second")

    await start_worker(progress_interval=0.05)
    job = await jq.enqueue("slow", {})
    follow = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jobqueue", "jobs", "logs", str(job.id), "--follow",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert follow.stdout is not None
    try:
        header = await asyncio.wait_for(follow.stdout.readline(), 30)
        assert header == b"--- attempt 1\n"
        first = await asyncio.wait_for(follow.stdout.readline(), 30)
        assert first.decode().split(" ", 2)[1:] == ["info", "first\n"]
        assert follow.returncode is None  # still following the running job
        gate.set()
        rest, errors = await asyncio.wait_for(follow.communicate(), 30)
    finally:
        if follow.returncode is None:
            follow.kill()
            await follow.wait()
    assert follow.returncode == 0, errors
    assert lines(rest.decode()) == ["second"]
    assert (await jq.get(job.id)).status == "completed"  # type: ignore[union-attr]


async def test_stdlib_logging_is_kept_only_when_asked_and_only_its_own_attempts(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    both_running = threading.Barrier(2, timeout=20)

    @jq.task("mixed")
    def mixed(payload: dict[str, Any], ctx: JobContext) -> None:
        both_running.wait()  # two attempts log at once, in two threads
        ctx.log.warning("through ctx", n=payload["n"])
        logging.getLogger("tests.handler").warning("through logging n=%s", payload["n"])

    async def run_two() -> list[list[str]]:
        jobs = [await jq.enqueue("mixed", {"n": n}) for n in (1, 2)]
        for job in jobs:
            assert (await jq.wait(job.id, timeout=20)).status == "completed"
        return [lines((await jq.attempts(job.id))[0].log) for job in jobs]

    worker = await start_worker()  # the default: ctx.log only
    assert await run_two() == [["through ctx n=1"], ["through ctx n=2"]]
    await worker.stop(asyncio.Event())

    await start_worker(job_logs="all")
    assert await run_two() == [
        ["through ctx n=1", "tests.handler: through logging n=1"],
        ["through ctx n=2", "tests.handler: through logging n=2"],
    ]


async def test_nothing_is_kept_with_job_logs_off(jq: JobQueue, start_worker: StartWorker) -> None:
    @jq.task("says")
    async def says(payload: dict[str, Any], ctx: JobContext) -> None:
        ctx.log.info("hello")

    worker = await start_worker(job_logs="off")
    job = await jq.enqueue("says", {})
    assert (await jq.wait(job.id, timeout=20)).status == "completed"
    [attempt] = await jq.attempts(job.id)
    assert (attempt.attempt, attempt.worker_id, attempt.error, attempt.log) == (
        1,
        worker.id,
        None,
        None,
    )


async def test_a_completed_job_keeps_its_worker_and_fences_out_its_late_writes(
    jq: JobQueue, start_worker: StartWorker, db: asyncpg.Connection
) -> None:
    """The worker stays on a job it completed, as the one that ran it (GET /jobs/{id},
    its attempts), and the fences hold by the job's state: the same claim's late
    completion, failure, heartbeat or progress changes nothing."""

    @jq.task("quiet")
    async def quiet(payload: dict[str, Any]) -> dict[str, int]:
        return {"n": 1}

    worker = await start_worker()
    job = await jq.enqueue("quiet", {})
    done = await jq.wait(job.id, timeout=20)
    assert (done.status, done.worker_id, done.result) == ("completed", worker.id, {"n": 1})
    [attempt] = await jq.attempts(job.id)
    assert (attempt.attempt, attempt.worker_id, attempt.error) == (1, worker.id, None)
    assert attempt.finished_at == done.finished_at

    schema = jq.settings.schema
    q = queries(schema)
    before = await db.fetchrow(f'SELECT * FROM "{schema}".jobs WHERE id = $1', job.id)
    claim = json.dumps({str(job.id): before["claim_token"]})
    held = {"claim": before["claim_token"], "error": "late", "delay": 0}
    late = [
        (q.complete, claim, "completed", None, json.dumps({str(job.id): 2}), None),
        (q.fail, json.dumps({str(job.id): held}), None),
        (q.heartbeat, claim, 30, None),
        (q.progress, json.dumps({str(job.id): held | {"fraction": 1}}), None),
    ]
    for query, given, *rest in late:
        assert await db.fetch(query, [job.id], given, worker.id, *rest) == []
    after = await db.fetchrow(f'SELECT * FROM "{schema}".jobs WHERE id = $1', job.id)
    assert dict(after) == dict(before)
    assert len(await jq.attempts(job.id)) == 1


async def test_a_stale_attempts_lines_are_fenced_out(
    jq: JobQueue, start_worker: StartWorker, db: asyncpg.Connection
) -> None:
    stolen = asyncio.Event()

    @jq.task("stale", max_attempts=5)
    async def stale(payload: dict[str, Any], ctx: JobContext) -> None:
        ctx.log.info("before")
        await stolen.wait()
        ctx.log.info("after")

    worker = await start_worker(progress_interval=0.05)
    assert worker.job_logs is not None
    job = await jq.enqueue("stale", {})
    await worker.job_logs.signals.written.wait_for(lambda n: n == 1)  # "before" is in
    # Its lease lost: another worker claimed the job again meanwhile (attempt 2).
    schema = jq.settings.schema
    await db.execute(
        f"""UPDATE "{schema}".jobs SET attempts = 2, worker_id = 'another', started_at = now()
            WHERE id = $1""",
        job.id,
    )
    stolen.set()
    await worker.job_logs.signals.written.wait_for(lambda n: n == 0)  # "after": refused
    rows = await db.fetch(
        f'SELECT attempt, worker_id, log FROM "{schema}".job_logs WHERE job_id = $1', job.id
    )
    assert [(r["attempt"], r["worker_id"], lines(r["log"])) for r in rows] == [
        (1, worker.id, ["before"])
    ]
