"""Run inside a network namespace of its own (``unshare --net``): connects to PostgreSQL
the way jobqueue does, then drops every packet on the namespace's loopback (tc's
``blackhole`` qdisc, as a pulled cable would) and prints, as JSON, how long each kind
of connection took to notice.

    python -m tests.faults.netprobe UNIX_SOCKET DSN  # the socket forwards to DSN's server

Unlike the userspace proxy, the kernel itself loses the packets here, so this is
what TCP keepalive and TCP_USER_TIMEOUT see.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable

from jobqueue.db.pool import connect, create_pool
from tests.faults.netproxy import NetProxy, dsn_via


def run(*args: str) -> None:
    subprocess.run(args, check=True)


async def probe(dsn: str) -> dict[str, object]:
    pool = await create_pool(dsn)  # the default statement timeout of 30 s
    idle = await connect(dsn)  # no command timeout: like the migration connection
    gone = asyncio.Event()
    idle.add_termination_listener(lambda _: gone.set())
    await pool.fetchval("SELECT 1")
    figures: dict[str, object] = {}

    async def timed(name: str, step: Awaitable[object]) -> None:
        try:
            await step
            figures[f"{name}_error"] = None
        except Exception as exc:
            figures[f"{name}_error"] = f"{type(exc).__name__}: {exc}"
        figures[name] = round(time.monotonic() - cut_at, 2)

    run("tc", "qdisc", "add", "dev", "lo", "root", "blackhole")
    cut_at = time.monotonic()
    try:
        await asyncio.wait_for(
            asyncio.gather(
                timed("query", pool.fetchval("SELECT 1")),
                timed("idle", gone.wait()),
                timed("connect", connect(dsn)),
            ),
            60,
        )
    finally:
        run("tc", "qdisc", "del", "dev", "lo", "root")
    back_at = time.monotonic()
    await pool.fetchval("SELECT 1")
    figures["query_after_return"] = round(time.monotonic() - back_at, 2)
    idle.terminate()
    pool.terminate()
    return figures


def main() -> None:
    run("ip", "link", "set", "lo", "up")
    proxy = NetProxy(sys.argv[1])  # 127.0.0.1 of this namespace -> the Unix socket
    try:
        figures = asyncio.run(probe(dsn_via(sys.argv[2], proxy.port)))
    finally:
        proxy.close()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
