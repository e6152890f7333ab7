"""One LISTEN connection per host: `jobqueue worker --processes N` listens in its
supervisor and relays each wake-up to its children over their stdin.

Without it every worker process holds a LISTEN connection of its own, so a host's
server connections grow with its processes. The relay is a line per event, written
to each child's pipe:

    q <payload>    a pending-jobs NOTIFY (its payload as sent, see db/sql.new_jobs)
    c <job id>     a running job asked to stop
    up | down      whether the supervisor's LISTEN is in place (down: poll)

A child that cannot keep up loses wake-ups, never blocks the others: its producer's
fallback poll finds what a lost wake-up announced. A child whose supervisor is gone
reads the end of its pipe and polls until it is stopped (it is sent SIGTERM then).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import IO

from jobqueue.db.listener import Listener
from jobqueue.db.sql import cancel_channel_name, channel_name
from jobqueue.logs import get_logger

log = get_logger("jobqueue.wakeups")

# Set by the supervisor in its children's environment: wake-ups come on stdin.
RELAYED = "JOBQUEUE_WAKEUPS_RELAYED"


def relayed_here() -> bool:
    return os.environ.get(RELAYED) == "1"


class Relay:
    """The supervisor's side: a Listener on a thread of its own, writing to pipes."""

    def __init__(self, dsn: str | None, schema: str) -> None:
        """``dsn``: where to LISTEN; None (poll-only): nowhere, and the children poll."""
        self._pipes: list[IO[bytes]] = []
        self._lock = threading.Lock()
        self._up = False
        self._loop = asyncio.new_event_loop()
        self._listener = Listener(
            dsn,
            schema,
            channel_name(schema),
            lambda payload: self._send(f"q {payload or ''}"),
            cancel_channel=cancel_channel_name(schema),
            on_cancel=lambda job_id: self._send(f"c {job_id}"),
            on_state=self._state,
        )
        self._thread = threading.Thread(target=self._run, name="jobqueue-relay", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._stop_loop)
        self._thread.join(10)

    def attach(self, pipe: IO[bytes]) -> None:
        """Relay to ``pipe`` from now on, starting with whether LISTEN is up."""
        os.set_blocking(pipe.fileno(), False)
        with self._lock:
            self._pipes.append(pipe)
            self._write(pipe, b"up\n" if self._up else b"down\n")

    def detach(self, pipe: IO[bytes]) -> None:
        with self._lock:
            if pipe in self._pipes:
                self._pipes.remove(pipe)
        with contextlib.suppress(OSError):
            pipe.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._task = self._loop.create_task(self._listener.run())
        with contextlib.suppress(asyncio.CancelledError):
            self._loop.run_until_complete(self._task)
        self._loop.close()

    def _stop_loop(self) -> None:
        self._task.cancel()

    def _state(self, up: bool) -> None:
        with self._lock:
            self._up = up
        self._send("up" if up else "down")

    def _send(self, line: str) -> None:
        data = line.encode() + b"\n"
        with self._lock:
            for pipe in self._pipes:
                self._write(pipe, data)

    @staticmethod
    def _write(pipe: IO[bytes], data: bytes) -> None:
        # A full pipe drops this line rather than stall every child (see above); a
        # pipe whose child is gone is detached by the supervisor when it notices.
        with contextlib.suppress(BlockingIOError, BrokenPipeError, ValueError, OSError):
            os.write(pipe.fileno(), data)


class RelayedListener:
    """A child's side: what db.listener.Listener gives a worker, read from stdin."""

    def __init__(
        self,
        on_queue: Callable[[str | None], None],
        *,
        on_cancel: Callable[[int], None],
    ) -> None:
        self._on_queue = on_queue
        self._on_cancel = on_cancel
        self.listening = asyncio.Event()

    @property
    def healthy(self) -> bool:
        return self.listening.is_set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer
        )
        try:
            while line := await reader.readline():
                self._handle(line.decode().rstrip("\n"))
            log.warning("wake-up relay closed; polling until stopped")
        finally:
            self.listening.clear()
            transport.close()

    def _handle(self, line: str) -> None:
        kind, _, rest = line.partition(" ")
        if kind == "q":
            self._on_queue(rest or None)
        elif kind == "c" and rest.isdigit():
            self._on_cancel(int(rest))
        elif kind == "up":
            self.listening.set()
            self._on_queue(None)  # a job may have arrived while LISTEN was down
        elif kind == "down":
            self.listening.clear()
