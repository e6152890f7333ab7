"""Durable steps and checkpoints against kill -9: a rescued job does not run again the
steps its killed attempt recorded, and a checkpointed loop resumes where it saved."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest

from jobqueue.config import Settings
from jobqueue.model.job import Job
from tests.conftest import Process, Spawn, enqueue, fetch, get

LEASE = 1.5


@pytest.fixture
def durable_env(env: dict[str, str], settings: Settings) -> dict[str, str]:
    fetch(settings.database_url, f'CREATE TABLE "{settings.schema}".ledger '
          "(job_id bigint NOT NULL, what text NOT NULL, attempt int NOT NULL)")  # fmt: skip
    env.update(
        JOBQUEUE_APP="durable_app:jq",
        JOBQUEUE_LEASE_SECONDS=str(LEASE),
        JOBQUEUE_RESCUE_INTERVAL="0.3",
        RETRY_DELAY_SECONDS="0",
    )
    return env


def ledger(settings: Settings, job_id: int) -> list[tuple[str, int]]:
    rows = fetch(
        settings.database_url,
        f'SELECT what, attempt FROM "{settings.schema}".ledger WHERE job_id = $1',
        job_id,
    )
    return [(r["what"], r["attempt"]) for r in rows]


def killed_where_it_hangs(
    settings: Settings, env: dict[str, str], spawn: Spawn, type: str
) -> tuple[Job, Process]:
    """A job of ``type`` whose worker is killed with -9 where its first attempt hangs,
    and the worker started to take it over."""
    victim = spawn(["worker"], env, name="victim")
    victim.wait_for_output("worker started")
    job = enqueue(settings, type, {})
    victim.wait_for_output(f"hung_job={job.id}")
    os.kill(victim.popen.pid, signal.SIGKILL)
    return job, spawn(["worker"], env, name="survivor")


def completed(settings: Settings, job_id: int) -> object:
    deadline = time.monotonic() + 60
    while (done := get(settings, job_id)).status != "completed":
        assert time.monotonic() < deadline, done
        time.sleep(0.05)
    return done


def test_steps_recorded_before_a_kill_are_not_run_again(
    settings: Settings, durable_env: dict[str, str], spawn: Spawn
) -> None:
    # Killed in step 3, steps 1 and 2 recorded.
    job, survivor = killed_where_it_hangs(settings, durable_env, spawn, "five_steps")

    done = completed(settings, job.id)
    assert done.result == [10, 20, 30, 40, 50]  # type: ignore[attr-defined]
    assert done.attempts == 2  # type: ignore[attr-defined]
    effects = ledger(settings, job.id)
    # Steps 1 and 2 were recorded by the killed attempt and not run again; step 3 had
    # done its side effect, not recorded it, and ran again (the at-most-once window);
    # steps 4 and 5 ran once, on the second attempt.
    assert Counter(what for what, _ in effects) == {
        "step 1": 1, "step 2": 1, "step 3": 2, "step 4": 1, "step 5": 1,
    }  # fmt: skip
    assert sorted(effects) == [
        ("step 1", 1), ("step 2", 1), ("step 3", 1), ("step 3", 2), ("step 4", 2), ("step 5", 2),
    ]  # fmt: skip
    steps = fetch(
        settings.database_url,
        f'SELECT name, attempt FROM "{settings.schema}".job_steps WHERE job_id = $1 ORDER BY name',
        job.id,
    )
    assert [(r["name"], r["attempt"]) for r in steps] == [
        ("step-1", 1), ("step-2", 1), ("step-3", 2), ("step-4", 2), ("step-5", 2),
    ]  # fmt: skip
    assert survivor.stop() == 0


def test_a_checkpointed_loop_killed_midway_resumes_after_its_last_checkpoint(
    settings: Settings, durable_env: dict[str, str], spawn: Spawn
) -> None:
    # Killed at item 450, its position saved at 400.
    job, survivor = killed_where_it_hangs(settings, durable_env, spawn, "thousand_items")

    done = completed(settings, job.id)
    assert done.checkpoint == 1000  # type: ignore[attr-defined]
    effects = ledger(settings, job.id)
    first = sorted(int(what.split()[1]) for what, attempt in effects if attempt == 1)
    second = sorted(int(what.split()[1]) for what, attempt in effects if attempt == 2)
    assert first == list(range(451))
    assert second == list(range(400, 1000))  # resumed at the last checkpoint, 400
    assert done.result == 600  # type: ignore[attr-defined]
    assert survivor.stop() == 0
