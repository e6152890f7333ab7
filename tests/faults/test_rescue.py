"""Leases, heartbeats and the rescuer, with real processes: a killed worker's job comes
back within the lease; a frozen worker's late outcome is rejected; leadership fails over."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from jobqueue.config import Settings
from tests.conftest import Spawn, enqueue, get

LEASE = 1.5
INTERVAL = 0.3
# The bound the rescuer promises: the lease, then up to a leader's term (three
# intervals) for a new leader, and one interval; plus slack for a loaded machine.
RESCUE_BOUND = LEASE + 4 * INTERVAL + 5


@pytest.fixture
def fast_leases(env: dict[str, str]) -> dict[str, str]:
    env.update(
        JOBQUEUE_APP="jobqueue.demo:jq",
        JOBQUEUE_LEASE_SECONDS=str(LEASE),
        JOBQUEUE_RESCUE_INTERVAL=str(INTERVAL),
        RETRY_DELAY_SECONDS="0",
    )
    return env


@pytest.mark.parametrize("fault", ["sigkill", "sigstop"])
def test_a_lost_workers_job_is_rescued_and_its_late_writes_rejected(
    settings: Settings, fast_leases: dict[str, str], spawn: Spawn, fault: str
) -> None:
    victim = spawn(["worker"], fast_leases, name="victim")
    victim.wait_for_output("This process is now the maintenance leader")
    job = enqueue(settings, "sleep", {"seconds": 2})
    victim.wait_for_output(f"attempt=1 job_id={job.id} max_attempts=3")  # job.started
    survivor = spawn(["worker"], fast_leases, name="survivor")
    survivor.wait_for_output("worker started")

    lost_at = time.monotonic()
    os.kill(victim.popen.pid, signal.SIGKILL if fault == "sigkill" else signal.SIGSTOP)
    survivor.wait_for_output(f"error='worker lost (lease expired)' job_id={job.id}", timeout=30)
    survivor.wait_for_output(f"attempt=2 job_id={job.id} max_attempts=3", timeout=30)
    assert time.monotonic() - lost_at < RESCUE_BOUND
    assert "This process is now the maintenance leader" in survivor.output  # failover
    deadline = time.monotonic() + 30
    while (done := get(settings, job.id)).status != "completed":
        assert time.monotonic() < deadline, done
        time.sleep(0.05)

    if fault == "sigstop":
        os.kill(victim.popen.pid, signal.SIGCONT)
        victim.wait_for_output(
            f"Stale completion of job {job.id} attempt 1 rejected: "
            "the job is no longer held by this attempt",
            timeout=30,
        )
    deadline = time.monotonic() + 10
    while (done := get(settings, job.id)).status != "completed":
        assert time.monotonic() < deadline, done
        time.sleep(0.05)
    assert (done.attempts, done.last_error) == (2, None)
    assert f":{survivor.popen.pid}:" in str(done.worker_id)  # the worker that completed it
    assert victim.stop() in (0, -signal.SIGKILL)
    assert survivor.stop() == 0


def test_a_job_whose_worker_dies_on_its_last_attempt_ends_failed(
    settings: Settings, fast_leases: dict[str, str], spawn: Spawn
) -> None:
    async def last_attempt() -> int:
        from jobqueue.app import JobQueue

        async with JobQueue(settings=settings) as jq:
            return (await jq.enqueue("sleep", {"seconds": 30}, max_attempts=1)).id

    job_id = asyncio.run(last_attempt())
    victim = spawn(["worker"], fast_leases, name="victim")
    victim.wait_for_output(f"attempt=1 job_id={job_id} max_attempts=1")  # job.started
    os.kill(victim.popen.pid, signal.SIGKILL)
    victim.popen.wait()
    survivor = spawn(["worker"], fast_leases, name="survivor")
    survivor.wait_for_output(
        f"job_id={job_id} max_attempts=1 queue=default status=failed type=sleep", timeout=30
    )
    done = get(settings, job_id)
    assert (done.status, done.attempts, done.last_error) == (
        "failed",
        1,
        "worker lost (lease expired)",
    )

    async def history() -> list[tuple[int, str, str | None]]:
        from jobqueue.app import JobQueue

        async with JobQueue(settings=settings) as jq:
            return [(a.attempt, a.error, a.worker_id) for a in await jq.attempts(job_id)]

    [(attempt, error, lost_worker)] = asyncio.run(history())
    assert (attempt, error) == (1, "worker lost (lease expired)")
    assert lost_worker is not None
    assert lost_worker.split(":")[1] == str(victim.popen.pid)  # host:pid:suffix
    assert survivor.stop() == 0


def test_running_workers_are_listed(
    settings: Settings, fast_leases: dict[str, str], spawn: Spawn
) -> None:
    import json
    import subprocess
    import sys

    import httpx

    server = spawn(["serve"], fast_leases)
    server.wait_for_output("Serving HTTP")
    job = enqueue(settings, "sleep", {"seconds": 30})
    server.wait_for_output(f"job_id={job.id} max_attempts=")  # job.started
    listed = httpx.get(f"http://127.0.0.1:{fast_leases['PORT']}/workers").json()
    assert len(listed) == 1
    assert (listed[0]["pid"], listed[0]["queues"], listed[0]["running"], listed[0]["slots"]) == (
        server.popen.pid,
        ["default"],
        1,
        5,
    )
    cli = subprocess.run(
        [sys.executable, "-m", "jobqueue", "workers", "--json"],
        env=fast_leases,
        capture_output=True,
        text=True,
        check=True,
    )
    assert [w["id"] for w in json.loads(cli.stdout)] == [listed[0]["id"]]
    server.popen.send_signal(signal.SIGINT)
    # Linux does not queue a second SIGINT that arrives before the first is handled:
    # send it once the first has been seen, or both count as one.
    server.wait_for_output("Shutdown requested")
    server.popen.send_signal(signal.SIGINT)
    assert server.popen.wait(30) == 0
    after = subprocess.run(
        [sys.executable, "-m", "jobqueue", "workers"],
        env=fast_leases,
        capture_output=True,
        text=True,
        check=True,
    )
    assert after.stdout == "no workers\n"
