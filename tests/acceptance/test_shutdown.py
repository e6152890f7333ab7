"""Graceful shutdown of a real `jobqueue` process: running jobs finish within the grace
period; what is left is handed back with its attempt not counted; exit code 0."""

from __future__ import annotations

import signal
import time

import pytest

from jobqueue.config import Settings
from tests.conftest import Process, Spawn, enqueue, get


def start_worker(spawn: Spawn, env: dict[str, str], *args: str) -> Process:
    proc = spawn(["worker", "--app", "sync_app:jq", *args], env)
    proc.wait_for_output("worker started")
    return proc


def test_sigterm_lets_a_running_job_finish_then_exits_0(
    settings: Settings, env: dict[str, str], spawn: Spawn
) -> None:
    env["JOBQUEUE_APP"] = "jobqueue.demo:jq"
    proc = spawn(["worker"], env)
    proc.wait_for_output("worker started")
    job = enqueue(settings, "sleep", {"seconds": 2})
    proc.wait_for_output(f"attempt=1 job_id={job.id} max_attempts=3")  # job.started
    proc.popen.send_signal(signal.SIGTERM)
    assert proc.popen.wait(20) == 0
    done = get(settings, job.id)
    assert (done.status, done.attempts) == ("completed", 1)
    assert "job.completed" in proc.output


@pytest.mark.parametrize("type", ["sleep", "sync_sleep"])
def test_a_job_longer_than_the_timeout_is_handed_back_without_counting_the_attempt(
    settings: Settings, env: dict[str, str], spawn: Spawn, type: str
) -> None:
    env["JOBQUEUE_APP"] = "sync_app:jq" if type == "sync_sleep" else "jobqueue.demo:jq"
    proc = spawn(["worker", "--shutdown-timeout", "1"], env)
    proc.wait_for_output("worker started")
    job = enqueue(settings, type, {"seconds": 60})
    proc.wait_for_output(f"attempt=1 job_id={job.id} max_attempts=3")  # job.started
    proc.popen.send_signal(signal.SIGTERM)
    assert proc.popen.wait(20) == 0, proc.output
    back = get(settings, job.id)
    assert (back.status, back.attempts, back.worker_id) == ("pending", 0, None)
    assert "Handed back 1 unfinished job(s)" in proc.output


def test_a_second_signal_stops_at_once_and_still_hands_jobs_back(
    settings: Settings, env: dict[str, str], spawn: Spawn
) -> None:
    env["JOBQUEUE_APP"] = "jobqueue.demo:jq"
    proc = spawn(["serve", "--shutdown-timeout", "60"], env)
    proc.wait_for_output("Serving HTTP")
    job = enqueue(settings, "sleep", {"seconds": 60})
    proc.wait_for_output(f"attempt=1 job_id={job.id} max_attempts=3")  # job.started
    proc.popen.send_signal(signal.SIGTERM)
    proc.wait_for_output("Shutting down: waiting up to 60s for 1 running job(s)")
    started = time.monotonic()
    proc.popen.send_signal(signal.SIGINT)
    assert proc.popen.wait(20) == 0, proc.output
    assert time.monotonic() - started < 10  # not the 60 s grace period
    back = get(settings, job.id)
    assert (back.status, back.attempts) == ("pending", 0)
