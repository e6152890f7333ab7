"""Workers with different task sets on one queue, as real processes: each claims only the
types it has handlers for, so no attempt fails for want of a handler; and `jobqueue
enqueue` refuses a type that no live worker handles."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.model.job import JobStatus
from tests.acceptance.test_metrics import Scrape, wait_until
from tests.conftest import Spawn, jobqueue

KNOWN = "fail_test, noop, send_email, sleep"  # jobqueue serve's demo tasks


def test_two_fleets_on_one_queue_each_run_their_own_types(
    env: dict[str, str], spawn: Spawn, settings: Settings
) -> None:
    """`jobqueue serve` (the demo tasks) and `jobqueue worker --app` (tally) both serve
    `default`: every job completes on its first attempt, none fails for want of a handler."""
    server = spawn(["serve"], env, name="serve")
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)
    worker = spawn(["worker", "--app", "tally_app:jq"], env, name="worker")
    worker.wait_for_output("worker started")

    async def run() -> list[tuple[str, JobStatus, int, str | None]]:
        async with JobQueue(settings=settings) as jq:
            ids = []
            for n in range(12):  # interleaved, so that each worker finds the other's first
                ids.append((await jq.enqueue("noop", {"n": n})).id)
                ids.append((await jq.enqueue("tally", {"n": n})).id)
            done = [await jq.wait(job_id, timeout=30) for job_id in ids]
            histories = [[(a.attempt, a.error) for a in await jq.attempts(j)] for j in ids]
            assert histories == [[(1, None)]] * len(ids)
            return [(j.type, j.status, j.attempts, j.last_error) for j in done]

    outcomes = asyncio.run(run())
    assert outcomes == [
        (t, JobStatus.COMPLETED, 1, None) for _ in range(12) for t in ("noop", "tally")
    ]
    workers = httpx.get(f"{base}/workers").json()
    assert sorted((w["types"], w["any_type"]) for w in workers) == [
        (["fail_test", "noop", "send_email", "sleep"], False),
        (["tally"], False),
    ]
    assert worker.stop() == 0
    assert server.stop() == 0
    assert "no handler for type" not in server.output + worker.output


def test_enqueue_refuses_a_type_no_live_worker_handles(env: dict[str, str], spawn: Spawn) -> None:
    nobody = jobqueue(env, "enqueue", "noop", "{}")
    assert (nobody.returncode, nobody.stdout) == (2, "")
    assert nobody.stderr == (
        "jobqueue: error: no live worker of queue default has a handler for type 'noop' "
        "(known types: none), and it is not declared (jobqueue types add); --force stores it "
        "anyway\n"
    )
    server = spawn(["serve"], env, name="serve")
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)

    typo = jobqueue(env, "enqueue", "typo_task", "{}")
    assert (typo.returncode, typo.stdout) == (2, "")
    assert typo.stderr == (
        "jobqueue: error: no live worker of queue default has a handler for type 'typo_task' "
        f"(known types: {KNOWN}), and it is not declared (jobqueue types add); --force stores "
        "it anyway\n"
    )
    elsewhere = jobqueue(env, "enqueue", "noop", "{}", "--queue", "mail")
    assert elsewhere.returncode == 2
    assert "no live worker of queue mail has a handler for type 'noop'" in elsewhere.stderr
    assert httpx.get(f"{base}/jobs").json()["jobs"] == []  # nothing stored

    ok = jobqueue(env, "enqueue", "noop", "{}", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["type"] == "noop"
    forced = jobqueue(env, "enqueue", "typo_task", "{}", "--json", "--force")
    assert forced.returncode == 0, forced.stderr
    typo_job = json.loads(forced.stdout)
    assert (typo_job["type"], typo_job["status"]) == ("typo_task", "pending")

    # The forced job waits for a handler, and says so; no worker claims it.
    queues = httpx.get(f"{base}/queues").json()["queues"]
    assert [(q["name"], q["unhandled"]) for q in queues] == [("default", 1)]
    waiting = httpx.get(f"{base}/jobs/{typo_job['id']}").json()
    assert (waiting["status"], waiting["attempts"]) == ("pending", 0)
    assert server.stop() == 0


def test_the_leader_exports_jobs_waiting_for_a_handler(
    env: dict[str, str], spawn: Spawn, settings: Settings
) -> None:
    """jobqueue_jobs_unhandled{queue,type}: the tally jobs wait while only `serve` runs,
    and the series goes to 0 once a worker with their handler has run them."""
    env["JOBQUEUE_RESCUE_INTERVAL"] = "0.5"
    server = spawn(["serve"], env, name="serve")
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)

    async def enqueue(n: int) -> list[int]:
        async with JobQueue(settings=settings) as jq:
            return [(await jq.enqueue("tally", {"n": i})).id for i in range(n)]

    ids = asyncio.run(enqueue(3))

    def unhandled(count: int) -> Callable[[], tuple[bool, str]]:
        def check() -> tuple[bool, str]:
            got = Scrape(f"{base}/metrics").total(
                "jobqueue_jobs_unhandled", queue="default", type="tally"
            )
            return got == count, f"jobqueue_jobs_unhandled is {got}"

        return check

    wait_until(unhandled(3))
    worker = spawn(["worker", "--app", "tally_app:jq"], env, name="worker")
    worker.wait_for_output("worker started")

    async def outcomes() -> list[tuple[JobStatus, int]]:
        async with JobQueue(settings=settings) as jq:
            return [
                (job.status, job.attempts)
                for job in [await jq.wait(job_id, timeout=30) for job_id in ids]
            ]

    assert asyncio.run(outcomes()) == [(JobStatus.COMPLETED, 1)] * 3
    wait_until(unhandled(0))
    assert worker.stop() == 0
    assert server.stop() == 0
