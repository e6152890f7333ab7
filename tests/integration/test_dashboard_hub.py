"""The dashboard's live hub: however many dashboards are open, one LISTEN connection
and one counters read per tick feed them all, and it closes with the last one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from jobqueue.app import JobQueue
from jobqueue.ui.live import Hub

pytestmark = pytest.mark.anyio


async def next_event(stream: AsyncIterator[str], wanted: str, timeout: float = 10) -> None:
    async with asyncio.timeout(timeout):
        async for chunk in stream:
            if chunk.startswith(f"event: {wanted}\n"):
                return


async def listeners(jq: JobQueue) -> int:
    """LISTEN connections on this schema's done channel, as the server sees them."""
    store = await jq.store()
    pool = await jq.pool()
    count: int = await pool.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'jobqueue-listener' "
        "AND query = $1",
        f'LISTEN "{store.done_channel}"',
    )
    return count


async def test_a_hundred_dashboards_share_one_listen_connection(jq: JobQueue) -> None:
    hub = Hub(jq)
    streams = [hub.events() for _ in range(100)]
    for stream in streams:
        assert (await anext(stream)).startswith("retry:")
    # Every stream takes its first "change" (the first reading of the counters).
    await asyncio.gather(*(next_event(s, "change") for s in streams))
    assert hub.listeners_opened == 1
    assert hub.subscribers == 100
    assert await listeners(jq) == 1

    # A job enqueued and a job ending reach every dashboard.
    job = await jq.enqueue("report")
    await asyncio.gather(*(next_event(s, "change") for s in streams))
    await jq.cancel(job.id)
    await asyncio.gather(*(next_event(s, "change") for s in streams))
    assert hub.listeners_opened == 1

    for stream in streams:
        await stream.aclose()  # type: ignore[attr-defined]
    assert hub.subscribers == 0
    deadline = asyncio.get_running_loop().time() + 5
    while True:  # until the connection's close reaches the server
        remaining = await listeners(jq)
        if remaining == 0 or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.05)
    assert remaining == 0
