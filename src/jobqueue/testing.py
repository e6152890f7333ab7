"""Helpers for an application's own tests, against a real database.

    from jobqueue.testing import assert_enqueued, drain, inline

    async def test_signup_sends_a_welcome_email(jq):
        await signup("a@example.com")                    # the code under test enqueues
        await assert_enqueued(jq, "send_email", payload={"to": "a@example.com"})
        [job] = await drain(jq)                          # run it now, in this process
        assert job.status == "completed"

``drain`` runs the application's real handlers with a real worker, so what passes here
passes in production; nothing is mocked. ``inline(jq)`` drains after every enqueue, so
that code under test finds its jobs done when ``enqueue`` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from jobqueue.app import JobQueue
from jobqueue.model.job import Job, JobStatus
from jobqueue.worker import Worker
from jobqueue.worker.worker import in_process

# The drain's worker polls often, so that a job falling due during the drain (a short
# retry delay) is found at once.
DRAIN_POLL_SECONDS = 0.05


async def drain(jq: JobQueue, *, timeout: float = 30.0, concurrency: int = 1) -> list[Job]:
    """Run every due job in this process, and those that fall due meanwhile (retries
    included), until no job is due or running; return the jobs that changed, in id
    order. ``concurrency`` jobs run at once: by default one after another, the easiest
    to reason about in a test.

    A retry scheduled for later than the drain's last poll stays pending and is
    returned as such. Raises TimeoutError if jobs are still due after ``timeout``.
    """
    # Every type is claimed: a job the application has no task for fails here, for the
    # test to see, rather than keeping the drain waiting for a worker that has one. No
    # gc.freeze: a test suite drains again and again, and each freeze would keep that
    # test's objects from ever being collected.
    settings = dataclasses.replace(
        jq.settings,
        worker_count=concurrency,
        poll_interval=DRAIN_POLL_SECONDS,
        claim_any_type=True,
        gc_freeze=False,
    )
    started_at = await jq.inspect.now()
    async with in_process(await jq.pool(), jq.dsn, settings, jq.tasks, clock=jq.clock) as worker:
        deadline = time.monotonic() + timeout
        while await _busy(jq, worker):
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs still due or running after {timeout:g}s")
            await asyncio.sleep(0.02)
    return await jq.inspect.jobs_changed_since(started_at)


@contextlib.asynccontextmanager
async def inline(jq: JobQueue) -> AsyncIterator[JobQueue]:
    """While active, every ``enqueue`` (and ``enqueue_many``) runs the due jobs before it
    returns, and ``enqueue`` returns its job as it ended:

        async with inline(jq):
            job = await jq.enqueue("send_email", {"to": "a@example.com"})
            assert job.status == "completed"

    A job a handler enqueues runs in the same drain, after the current one. A job
    enqueued with ``conn=`` (inside an uncommitted transaction) is not visible yet: it
    runs at the next enqueue, or when the block ends.
    """
    draining = False

    async def run_due() -> None:
        nonlocal draining
        if draining:  # enqueued by a handler: the drain in progress will take it
            return
        draining = True
        try:
            await drain(jq)
        finally:
            draining = False

    jq.after_enqueue = run_due
    try:
        yield jq
        await run_due()
    finally:
        jq.after_enqueue = None


async def _busy(jq: JobQueue, worker: Worker) -> bool:
    if worker.executor.running:
        return True
    return await jq.inspect.jobs_due_or_running()


async def assert_enqueued(
    jq: JobQueue,
    type: str,
    *,
    payload: Any = None,
    queue: str | None = None,
    count: int | None = None,
) -> list[Job]:
    """Assert that pending jobs of ``type`` exist (exactly ``count`` if given), each
    matching ``payload`` (the keys given, not all; for a typed task, an instance of its
    payload type compares as the JSON it is stored as) and ``queue``; return them. The
    failure message lists what is pending, to show what was enqueued instead."""
    task = jq.tasks.get(type)
    if payload is not None and not isinstance(payload, Mapping) and task is not None:
        payload = task.dump(payload)
    pending = await jq.list(status=JobStatus.PENDING, limit=10_000)
    matching = [
        job
        for job in pending
        if job.type == type
        and (queue is None or job.queue == queue)
        and (payload is None or _contains(job.payload, payload))
    ]
    wanted = f"{count} job(s)" if count is not None else "a job"
    if (count is None and not matching) or (count is not None and len(matching) != count):
        seen = "; ".join(f"{j.type} {j.payload} in {j.queue}" for j in pending[:20]) or "none"
        raise AssertionError(
            f"expected {wanted} of type {type!r} matching payload={payload!r} "
            f"queue={queue!r}, found {len(matching)}; pending: {seen}"
        )
    return matching


def _contains(actual: Any, expected: Mapping[str, Any]) -> bool:
    return isinstance(actual, Mapping) and all(
        key in actual and actual[key] == value for key, value in expected.items()
    )
