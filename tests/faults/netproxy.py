"""A TCP proxy for tests that can cut the network the way a pulled cable or a firewall
DROP rule does: bytes stop, but no connection is ever closed or refused.

    proxy = NetProxy(("127.0.0.1", 5432))  # listens on 127.0.0.1:proxy.port
    proxy.blackhole()                       # nothing gets through any more
    proxy.forward()                         # new connections work again

Either end may be a Unix socket instead, to cross into a network namespace.

A connection that was open during a blackhole stays open and silent for good, like a
half-open connection whose peer forgot it: the client must notice by itself. The
proxy runs its own event loop in a thread, so synchronous tests can drive it.

Being a userspace proxy, it acknowledges every byte at the TCP level: it looks like
a middlebox that terminates TCP (pgbouncer, a cloud SQL proxy, a load balancer) and
stopped forwarding, so only client-side timeouts can notice it, not TCP keepalives
or TCP_USER_TIMEOUT (tests/netprobe.py has the kernel drop packets instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit

T = TypeVar("T")
CHUNK = 64 * 1024
Address = tuple[str, int] | str  # (host, port), or the path of a Unix socket


class NetProxy:
    def __init__(
        self, target: Address, *, listen_host: str = "127.0.0.1", listen_unix: str | None = None
    ) -> None:
        """Forward to ``target`` from a free port of ``listen_host``, or from ``listen_unix``."""
        self._target = target
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._forwarding = True
        self._pumps: set[asyncio.Task[None]] = set()
        # Every socket ever opened, held until close(): a blackholed one is never closed.
        self._writers: list[asyncio.StreamWriter] = []
        if listen_unix is None:
            self._server = self._call(asyncio.start_server(self._accepted, listen_host, 0))
            self.port: int = self._server.sockets[0].getsockname()[1]
        else:
            self._server = self._call(asyncio.start_unix_server(self._accepted, listen_unix))
        self.connections = 0  # accepted so far

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    def blackhole(self) -> None:
        """From now on no byte crosses, on open connections or new ones."""

        async def cut() -> None:
            self._forwarding = False
            for pump in self._pumps:
                pump.cancel()
            await asyncio.gather(*self._pumps, return_exceptions=True)

        self._call(cut())

    def forward(self) -> None:
        """New connections are forwarded again; blackholed ones stay silent."""

        async def restore() -> None:
            self._forwarding = True

        self._call(restore())

    def close(self) -> None:
        async def shut() -> None:
            self._server.close()
            for pump in self._pumps:
                pump.cancel()
            await asyncio.gather(*self._pumps, return_exceptions=True)
            for writer in self._writers:
                writer.transport.abort()
            await self._server.wait_closed()

        self._call(shut())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        if not self._forwarding:
            return  # accepted, and then silence: the SYN-ACK came, nothing else will
        try:
            if isinstance(self._target, str):
                up_reader, up_writer = await asyncio.open_unix_connection(self._target)
            else:
                up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.append(up_writer)
        if not self._forwarding:  # cut while connecting
            return
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            pump = asyncio.create_task(self._pump(src, dst))
            self._pumps.add(pump)
            pump.add_done_callback(self._pumps.discard)

    @staticmethod
    async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await src.read(CHUNK):
                dst.write(data)
                await dst.drain()
        # The peer closed (in forward mode only): pass the close on.
        dst.transport.abort()


def dsn_via(dsn: str, port: int, host: str = "127.0.0.1") -> str:
    """``dsn`` with its host and port replaced by ``host``:``port``."""
    parts = urlsplit(dsn)
    user, at, _ = parts.netloc.rpartition("@")
    return parts._replace(netloc=f"{user}{at}{host}:{port}").geturl()
