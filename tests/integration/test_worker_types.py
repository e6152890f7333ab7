"""A worker claims only the job types it has handlers for, and says which when it
registers; a job no live worker handles waits, counted per queue and type."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.model.job import JobStatus
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio


async def test_a_worker_leaves_jobs_of_other_types_pending(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("mine")
    async def mine(payload: dict[str, Any]) -> None:
        pass

    theirs = [(await jq.enqueue("theirs", {"n": n})).id for n in range(5)]  # ahead of mine
    ours = [(await jq.enqueue("mine", {"n": n})).id for n in range(3)]
    worker = await start_worker()
    for job_id in ours:
        assert (await jq.wait(job_id, timeout=15)).status == JobStatus.COMPLETED
    # More claim passes since: none took a job of the type it has no handler for.
    worker.producer.signals.polled.clear()
    assert await worker.producer.signals.polled.times(2) == [0, 0]
    for job_id in theirs:
        job = await jq.get(job_id)
        assert job is not None
        assert (job.status, job.attempts, job.last_error) == (JobStatus.PENDING, 0, None)
    [default] = await jq.queues()
    assert (default.name, default.pending, default.unhandled) == ("default", 5, 5)
    assert (await jq.queue("default")).unhandled == 5
    [announced] = await jq.workers()
    assert (announced.types, announced.any_type) == (["mine"], False)


async def test_claim_any_type_fails_a_job_without_handler_as_before(jq: JobQueue) -> None:
    job = await jq.enqueue("nobody_handles_this", max_attempts=1)
    async with jq.worker(claim_any_type=True):
        [announced] = await jq.workers()
        assert announced.any_type is True
        done = await jq.wait(job.id, timeout=15)
    assert done.status == JobStatus.FAILED
    assert done.last_error == "no handler for type nobody_handles_this"


async def test_a_typed_worker_runs_a_released_child_of_its_own_types_only(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    """A completion hands the worker the children it releases (complete_handoff.sql):
    only those of the types it has handlers for."""

    @jq.task("parent")
    async def parent(payload: dict[str, Any]) -> None:
        pass

    @jq.task("child")
    async def child(payload: dict[str, Any]) -> None:
        pass

    wf = jq.workflow()
    first = wf.add("parent", {}, ref="p")
    wf.add("child", {}, ref="c", depends_on=[first])
    wf.add("stranger", {}, ref="s", depends_on=[first])
    created = await wf.enqueue()
    await start_worker()
    assert (await jq.wait(created.jobs["c"], timeout=15)).status == JobStatus.COMPLETED
    stranger = await jq.get(created.jobs["s"])
    assert stranger is not None
    assert (stranger.status, stranger.attempts) == (JobStatus.PENDING, 0)


async def test_jobs_wait_for_a_handler_by_queue_and_type(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    """Unhandled: no live worker serving the queue has the type (a silent worker does not
    count; one that claims any type takes every type of its queues)."""
    await db.execute(
        f"""INSERT INTO "{schema}".workers (id, host, pid, queues, slots, heartbeat_at,
                                            types, any_type)
            VALUES ('live', 'h', 1, '{{default}}', 5, now(), '{{a}}', false),
                   ('silent', 'h', 2, '{{default}}', 5, now() - interval '1 hour',
                    '{{b}}', false),
                   ('any', 'h', 3, '{{mail}}', 5, now(), '{{}}', true)"""
    )
    for queue, type_, count in [
        ("default", "a", 2), ("default", "b", 3), ("default", "c", 1), ("mail", "z", 4),
        ("reports", "r", 1),
    ]:  # fmt: skip
        for _ in range(count):
            await jq.enqueue(type_, queue=queue)
    store = await jq.store()
    assert await store.queue_unhandled(within_seconds=30) == [
        ("default", "b", 3),
        ("default", "c", 1),
        ("reports", "r", 1),
    ]
    assert [(q.name, q.pending, q.unhandled) for q in await jq.queues()] == [
        ("default", 6, 4),
        ("mail", 4, 0),
        ("reports", 1, 1),
    ]
    assert await store.workers_types(within_seconds=30, queue="default") == ["a"]
    assert await store.workers_types(within_seconds=30, queue="mail") == []


async def test_a_forgotten_worker_announces_its_types_again(
    jq: JobQueue, start_worker: StartWorker, db: asyncpg.Connection, schema: str
) -> None:
    """A worker silent long enough is dropped from the workers table (an outage, a
    stall); its next heartbeat registers it again, or its types would count as handled
    by no one and `jobqueue enqueue` would refuse them."""

    @jq.task("mine")
    async def mine(payload: dict[str, Any]) -> None:
        pass

    worker = await start_worker()
    await db.execute(f'DELETE FROM "{schema}".workers')
    store = await jq.store()
    assert await store.workers_types(within_seconds=30, queue="default") == []
    await worker.heartbeat.beat()
    assert await store.workers_types(within_seconds=30, queue="default") == ["mine"]
