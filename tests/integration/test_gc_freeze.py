"""A started worker moves what its process holds to the garbage collector's permanent
generation (gc_tuning.py), unless JOBQUEUE_GC_FREEZE is off."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.model.job import JobStatus
from jobqueue.testing import drain
from jobqueue.worker import Worker

pytestmark = pytest.mark.anyio


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """Nothing frozen before, and nothing left frozen after (the test process's objects
    would otherwise never be collected)."""
    gc.unfreeze()
    yield
    gc.unfreeze()


@pytest.mark.parametrize("freeze", [True, False])
async def test_a_started_worker_freezes_what_the_process_holds_unless_told_not_to(
    jq: JobQueue, settings: Settings, unfrozen: None, freeze: bool
) -> None:
    settings = dataclasses.replace(settings, gc_freeze=freeze)
    worker = Worker(await jq.pool(), jq.dsn, settings, jq.tasks)
    assert gc.get_freeze_count() == 0
    await worker.start()
    try:
        frozen = gc.get_freeze_count()
        # The worker itself is among what is frozen: a full collection walks none of it.
        assert (frozen > 0) is freeze
        assert any(o is worker for o in gc.get_objects()) is not freeze
    finally:
        await worker.stop(asyncio.Event())


class Node:
    """An object that can refer to itself: cyclic garbage once dropped."""

    me: Node | None = None


async def test_garbage_left_before_the_start_is_collected_not_frozen(
    jq: JobQueue, settings: Settings, unfrozen: None
) -> None:
    """A cycle dropped before the worker starts is freed by the start's collection;
    frozen with the rest, it would stay for the life of the process."""
    settings = dataclasses.replace(settings, gc_freeze=True)
    worker = Worker(await jq.pool(), jq.dsn, settings, jq.tasks)
    gc.disable()  # no collection of its own frees the cycle before the start
    try:
        node = Node()
        node.me = node
        dropped = weakref.ref(node)
        del node
        await worker.start()
    finally:
        gc.enable()
    try:
        gc.collect()
        assert dropped() is None
        assert gc.get_freeze_count() > 0
    finally:
        await worker.stop(asyncio.Event())


async def test_the_testing_drain_freezes_nothing(jq: JobQueue, unfrozen: None) -> None:
    """A test suite drains again and again: a freeze each time would keep every test's
    objects from being collected."""
    jq.settings = dataclasses.replace(jq.settings, gc_freeze=True)

    @jq.task("noop")
    async def noop(payload: dict[str, Any]) -> None:
        return None

    await jq.enqueue("noop")
    [job] = await drain(jq)
    assert job.status == JobStatus.COMPLETED
    assert gc.get_freeze_count() == 0
