"""Between threads and event loops. The sync API's event loop: one private loop in a
daemon thread serves every sync call (``enqueue_sync``, ``get_sync``, ``wait_sync``), so
that a script pays for its connection once, not once per call. And ``set_event``, for
the writers that sync handlers feed from their threads (progress, job logs)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def set_event(event: asyncio.Event, loop: asyncio.AbstractEventLoop) -> None:
    """Set ``event``, which belongs to ``loop``, from that loop or from any thread (an
    asyncio.Event may only be touched from its own loop's thread)."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        event.set()
    else:
        loop.call_soon_threadsafe(event.set)


class SyncBridge:
    def __init__(self, on_close: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """``on_close``: run on the loop before it stops (closing what it opened)."""
        self._on_close = on_close
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the bridge's loop, started on first use; block for its result."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=loop.run_forever, name="jobqueue-sync-api", daemon=True
                )
                self._thread.start()
                self._loop = loop
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def close(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._on_close(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join()
        loop.close()
