"""Snooze: a handler that cannot run yet runs again later without spending an attempt;
each snooze is in the job's history and counted; an endless snooze ends as a failure
at JOBQUEUE_MAX_SNOOZES, saying so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobqueue import JobContext, Snooze
from jobqueue.app import JobQueue
from jobqueue.model.job import JobStatus
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio


async def test_a_snooze_runs_the_job_again_later_keeping_its_attempts(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    seen: list[int] = []

    @jq.task("wait_for_file", max_attempts=1)
    async def wait_for_file(payload: dict[str, Any], ctx: JobContext) -> str:
        seen.append(ctx.attempt)
        if len(seen) == 1:
            raise Snooze(0.2)
        if len(seen) == 2:
            raise Snooze(at=datetime.now(UTC) + timedelta(seconds=0.2))
        return "found"

    job = await jq.enqueue("wait_for_file")
    await start_worker(retry_delay=60)
    done = await jq.wait(job.id, timeout=15)
    # One attempt allowed, two snoozes: it still ran, as attempt 1 each time.
    assert (done.status, done.attempts, done.result) == (JobStatus.COMPLETED, 1, "found")
    assert seen == [1, 1, 1]
    history = await jq.attempts(job.id)
    assert [(a.attempt, (a.error or "")[:11]) for a in history] == [
        (1, "snoozed for"),
        (1, "snoozed for"),
        (1, ""),
    ]


async def test_an_endless_snooze_fails_at_the_cap_saying_so(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("never_ready", max_attempts=3)
    async def never_ready(payload: dict[str, Any]) -> None:
        raise Snooze(0)

    job = await jq.enqueue("never_ready")
    await start_worker(retry_delay=0, max_snoozes=3)
    done = await jq.wait(job.id, timeout=15)
    assert done.status == JobStatus.FAILED
    assert done.last_error == ("snoozed 3 times (JOBQUEUE_MAX_SNOOZES): it never became ready")
    history = await jq.attempts(job.id)
    assert len(history) == 4
    assert history[-1].error == done.last_error


def test_a_snooze_takes_seconds_or_a_time_and_not_both() -> None:
    for bad in ({}, {"seconds": 1, "at": datetime.now(UTC)}, {"seconds": -1},
                {"at": datetime(2026, 1, 1)}):  # fmt: skip
        with pytest.raises(ValueError, match="Snooze"):
            Snooze(**bad)  # type: ignore[arg-type]
