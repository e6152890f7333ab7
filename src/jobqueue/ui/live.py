"""Live updates: one hub per process feeds every open dashboard by server-sent events.

The hub holds one LISTEN connection (the done channel: jobs that ended) and reads the
queue counters once a second, whatever the number of dashboards open: a hundred
browsers cost one connection and one counters query a second, not a hundred. It
starts with the first subscriber and stops with the last. Each tick it sends
``change`` when the counters moved or a job ended since the last one, and
``running`` every RUNNING_EVERY ticks while any job runs (progress changes neither);
a page then fetches its own content again (ui.js).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from jobqueue.app import JobQueue
from jobqueue.logs import get_logger

log = get_logger("jobqueue.ui")

TICK_SECONDS = 1.0
RUNNING_EVERY = 2  # ticks between "running" events, for the progress of running jobs
# A stream ends after this long and the browser reconnects (EventSource does): a
# proxy's idle timeout never cuts one, and a server stopping waits for none.
STREAM_SECONDS = 300.0
KEEPALIVE_TICKS = 15
# Jobs ending in a stream of NOTIFYs cost at most one counters read per this.
MIN_GAP_SECONDS = 0.25


class Hub:
    def __init__(self, jq: JobQueue) -> None:
        self._jq = jq
        self._subscribers: set[asyncio.Queue[str]] = set()
        self._task: asyncio.Task[None] | None = None
        self._ended = asyncio.Event()  # a NOTIFY since the last tick
        self.listeners_opened = 0  # for the tests: LISTEN connections this hub opened

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    async def events(self, stopping: asyncio.Event | None = None) -> AsyncIterator[str]:
        """The text/event-stream of one dashboard, until STREAM_SECONDS or ``stopping``."""
        inbox: asyncio.Queue[str] = asyncio.Queue(maxsize=16)
        self._subscribers.add(inbox)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="jobqueue-ui-hub")
        loop = asyncio.get_running_loop()
        until = loop.time() + STREAM_SECONDS
        try:
            yield "retry: 1000\n\n"
            while loop.time() < until and not (stopping is not None and stopping.is_set()):
                with contextlib.suppress(TimeoutError):
                    event = await asyncio.wait_for(inbox.get(), TICK_SECONDS)
                    yield f"event: {event}\ndata: {{}}\n\n"
        finally:
            self._subscribers.discard(inbox)
            if not self._subscribers and self._task is not None:
                self._task.cancel()
                self._task = None

    def _publish(self, event: str) -> None:
        for inbox in self._subscribers:
            with contextlib.suppress(asyncio.QueueFull):  # a slow reader misses a tick
                inbox.put_nowait(event)

    async def _run(self) -> None:
        listener = await self._jq.inspect.done_listener(self._announced)
        self.listeners_opened += 1
        listening = asyncio.create_task(listener.run(), name="jobqueue-ui-listener")
        last: object = None
        ticks = 0
        try:
            while True:
                await asyncio.sleep(MIN_GAP_SECONDS)
                try:
                    queues = await self._jq.queues()
                except Exception as exc:  # the database is away: the pages say so
                    log.warning("dashboard: cannot read the queue counters", error=str(exc))
                    queues = None
                snapshot = None if queues is None else [
                    (q.name, q.pending, q.running, q.completed, q.failed, q.cancelled, q.paused)
                    for q in queues
                ]  # fmt: skip
                ticks += 1
                if snapshot != last or self._ended.is_set():
                    self._ended.clear()
                    last = snapshot
                    self._publish("change")
                elif ticks % RUNNING_EVERY == 0 and any(q.running for q in queues or ()):
                    self._publish("running")
                elif ticks % KEEPALIVE_TICKS == 0:
                    self._publish("keepalive")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._ended.wait(), TICK_SECONDS)
        finally:
            listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listening

    def _announced(self, payload: str | None) -> None:
        self._ended.set()
