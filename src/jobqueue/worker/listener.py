"""LISTEN for new jobs on a dedicated connection, and reconnect when it is lost.

While the listener is down the producer's fallback poll still finds every job;
``healthy`` says which of the two is in charge, for /readyz and the logs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import asyncpg
import structlog

from jobqueue.db.pool import connect

log = structlog.get_logger("jobqueue.listener")


class Listener:
    def __init__(self, dsn: str, channel: str, on_queue: Callable[[str | None], None]) -> None:
        self._dsn = dsn
        self._channel = channel
        self._on_queue = on_queue  # called with the queue named, or None: "check all"
        self.listening = asyncio.Event()  # set while LISTEN is in place

    @property
    def healthy(self) -> bool:
        return self.listening.is_set()

    async def run(self) -> None:
        backoff = 0.1
        while True:
            lost = asyncio.Event()
            conn: asyncpg.Connection | None = None
            try:
                conn = await connect(self._dsn, "jobqueue-listener")
                conn.add_termination_listener(lambda _, lost=lost: lost.set())
                await conn.add_listener(self._channel, self._notified)
                if backoff > 0.1:
                    log.info("listener reconnected; wake-ups by NOTIFY again")
                self.listening.set()
                backoff = 0.1
                self._on_queue(None)  # a job may have arrived while we were away
                await lost.wait()
                log.warning("listener connection lost; polling until it is back")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("listener cannot connect; polling meanwhile", error=str(exc))
            finally:
                self.listening.clear()
                if conn is not None and not conn.is_closed():
                    conn.terminate()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    def _notified(self, conn: object, pid: int, channel: str, payload: str) -> None:
        self._on_queue(payload or None)
