"""LISTEN on a dedicated connection, and reconnect when it is lost.

Workers listen for new jobs and cancel requests, ``jq.wait`` for jobs that ended.
While the listener is down the producer's fallback poll still finds every job;
``healthy`` says which of the two is in charge, for /readyz and the logs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import asyncpg

from jobqueue.db.pool import connect, error_text
from jobqueue.db.store import Store
from jobqueue.logs import get_logger

log = get_logger("jobqueue.listener")

# The LISTEN connection only ever waits, so a network that silently drops its
# packets leaves it waiting for good: TCP keepalive notices only when nothing on the
# way still answers for the server (a TCP proxy or pgbouncer does). So it is pinged
# every PING_INTERVAL s and replaced if the answer takes over PING_TIMEOUT s.
# Defaults 5 s and 5 s: a dead connection is replaced within about 10 s, for one
# trivial query per 5 s per worker process. Shorter notices sooner; a timeout too
# short for a busy server's answer would reconnect for nothing.
PING_INTERVAL = 5.0
PING_TIMEOUT = 5.0


class Listener:
    def __init__(
        self,
        dsn: str | None,
        schema: str,
        channel: str,
        on_queue: Callable[[str | None], None],
        *,
        cancel_channel: str | None = None,
        on_cancel: Callable[[int], None] | None = None,
        on_state: Callable[[bool], None] = lambda listening: None,
    ) -> None:
        self._dsn = dsn
        self._channel = channel
        self._cancel_channel = cancel_channel
        self._on_cancel = on_cancel  # called with the id of a job asked to stop
        self._schema = schema  # for the ping, run on the LISTEN connection
        self._on_queue = on_queue  # called with the payload, or None: "check all"
        self._on_state = on_state  # told when LISTEN comes (True) and goes (False)
        self.listening = asyncio.Event()  # set while LISTEN is in place

    @property
    def healthy(self) -> bool:
        return self.listening.is_set()

    async def run(self) -> None:
        """Listen until cancelled. Without a DSN (poll-only, see Settings.poll_only)
        nothing listens: ``healthy`` stays False, and every user of it polls."""
        dsn = self._dsn
        if dsn is None:
            await asyncio.Event().wait()
            return
        backoff = 0.1
        while True:
            lost = asyncio.Event()
            conn: asyncpg.Connection | None = None
            try:
                conn = await connect(dsn, "jobqueue-listener", command_timeout=PING_TIMEOUT)
                conn.add_termination_listener(lambda _, lost=lost: lost.set())
                await conn.add_listener(self._channel, self._notified)
                if self._cancel_channel is not None:
                    await conn.add_listener(self._cancel_channel, self._cancel_notified)
                if backoff > 0.1:
                    log.info("listener reconnected; wake-ups by NOTIFY again")
                self.listening.set()
                self._on_state(True)
                backoff = 0.1
                self._on_queue(None)  # a job may have arrived while we were away
                error = await self._watch(Store(conn, self._schema), lost)
                log.warning("listener connection lost; polling until it is back", error=error)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("listener cannot connect; polling meanwhile", error=error_text(exc))
            finally:
                if self.listening.is_set():
                    self._on_state(False)
                self.listening.clear()
                if conn is not None and not conn.is_closed():
                    conn.terminate()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    @staticmethod
    async def _watch(conn: Store, lost: asyncio.Event) -> str:
        """Return when the connection is lost or stops answering; says which."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lost.wait(), PING_INTERVAL)
                return "connection closed"
            try:
                await conn.ping()  # bounded by the connection's command timeout
            except Exception as exc:
                return f"no answer to a ping: {error_text(exc)}"

    def _notified(self, conn: object, pid: int, channel: str, payload: str) -> None:
        self._on_queue(payload or None)

    def _cancel_notified(self, conn: object, pid: int, channel: str, payload: str) -> None:
        if self._on_cancel is not None and payload.isdigit():
            self._on_cancel(int(payload))
