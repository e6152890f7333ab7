"""Network faults: the database becomes unreachable without any connection being closed
or refused, as when a cable is pulled or a firewall drops packets.

The first test cuts a worker and an API process off with a userspace proxy (which, like
a middlebox, still acknowledges every byte: only client-side timeouts can notice). The
second makes the kernel itself drop the packets, which is what the TCP options are for.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest

from jobqueue.db import pool
from tests.conftest import ROOT, Spawn
from tests.faults.netproxy import NetProxy, dsn_via

BLACKHOLE_SECONDS = 16.0
# The promise: while cut off, every request is answered (503) within this...
REQUEST_BOUND = 10.0
# ...and every job completes within 10 s of the network's return (+ slack for a busy
# machine and for this test's 0.2 s polling).
RESUME_BOUND = 10.0 + 2.0
BEFORE, DURING = 10, 20  # jobs enqueued before and during the black hole


@pytest.fixture
def proxy(pg_dsn: str) -> Iterator[NetProxy]:
    target = urlsplit(pg_dsn)
    assert target.hostname, "the test database must be reached over TCP"
    netproxy = NetProxy((target.hostname, target.port or 5432))
    yield netproxy
    netproxy.close()


def test_worker_and_api_survive_an_unreachable_network(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn, proxy: NetProxy
) -> None:
    """Cut off for 16 s while jobs keep arriving: both processes stay up, every API request
    is answered 503 within 10 s, and within 10 s of the network's return every job has
    run exactly once and the API accepts jobs again."""
    env.update(
        DATABASE_URL=dsn_via(pg_dsn, proxy.port),
        LEDGER_DATABASE_URL=pg_dsn,  # the handlers' own writes bypass the proxy
        JOBQUEUE_APP="direct_ledger_app:jq",
        POLL_INTERVAL_SECONDS="1",
        # The client-side bound on a query follows this (server-side) one: behind this
        # proxy a request waits up to 2 x (2 + 1) s; with the default 30 s, about a minute.
        JOBQUEUE_STATEMENT_TIMEOUT="2",
    )

    async def sql(query: str, *args: object) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(pg_dsn)  # straight to the database, never cut off
        try:
            return await conn.fetch(query, *args)
        finally:
            await conn.close()

    def enqueue(n: int) -> None:
        insert = (
            f"""INSERT INTO "{schema}".jobs (type) SELECT 'record' FROM generate_series(1, $1)"""
        )
        asyncio.run(sql(insert, n))

    def unfinished() -> int:
        rows = asyncio.run(
            sql(f"""SELECT count(*) FROM "{schema}".jobs WHERE status <> 'completed'""")
        )
        return int(rows[0][0])

    asyncio.run(sql(f'CREATE TABLE "{schema}".ledger (job_id bigint, attempt int, pid int)'))
    worker = spawn(["worker"], env, name="worker")
    api = spawn(["api"], env, name="api")
    base = f"http://127.0.0.1:{env['PORT']}"
    worker.wait_for_output("worker started")
    api.wait_http(base)

    # A timeout well past the bound, so that a hang is measured rather than cut short.
    with httpx.Client(base_url=base, timeout=REQUEST_BOUND + 20) as client:
        assert client.post("/jobs", json={"type": "record"}).status_code == 201
        enqueue(BEFORE - 1)
        deadline = time.monotonic() + 10
        while unfinished():
            assert time.monotonic() < deadline, worker.output[-3000:]
            time.sleep(0.1)

        proxy.blackhole()
        cut_at = time.monotonic()
        requests = [("POST", "/jobs"), ("GET", "/jobs/1"), ("GET", "/readyz")]
        answers: list[tuple[str, float]] = []
        enqueued = 0
        while (elapsed := time.monotonic() - cut_at) < BLACKHOLE_SECONDS or enqueued < DURING:
            if enqueued < DURING * elapsed / BLACKHOLE_SECONDS:
                enqueue(1)
                enqueued += 1
                continue
            method, path = requests[len(answers) % len(requests)]
            started = time.monotonic()
            try:
                r = client.request(method, path, json={"type": "record"})
            except httpx.TimeoutException:
                pytest.fail(f"{method} {path} unanswered after {time.monotonic() - started:.1f}s")
            took = time.monotonic() - started
            answers.append((f"{method} {path}", took))
            assert r.status_code == 503, (method, path, r.status_code, r.text)
            if path == "/readyz":
                assert r.json()["database"] == "unreachable", r.text
            elif method == "POST":  # sent into the black hole, or no connection had
                assert r.json()["stored"] in (False, "unknown"), r.text
            else:
                assert r.json() == {"detail": "database unavailable; retry later"}
            assert took < REQUEST_BOUND, (method, path, took)
            assert worker.popen.poll() is None, worker.output[-3000:]
            assert api.popen.poll() is None, api.output[-3000:]
        cut_for = time.monotonic() - cut_at
        assert "database unavailable; claiming paused" in worker.output, worker.output[-3000:]
        # The LISTEN connection looks idle and healthy to the kernel: it must be probed.
        assert "listener connection lost" in worker.output, worker.output[-3000:]

        proxy.forward()
        back_at = time.monotonic()
        deadline = back_at + RESUME_BOUND
        while (r := client.post("/jobs", json={"type": "record"})).status_code != 201:
            assert r.status_code == 503, r.text
            assert time.monotonic() < deadline, api.output[-3000:]
            time.sleep(0.2)
        api_back_in = time.monotonic() - back_at
        while unfinished():
            assert time.monotonic() < deadline, (unfinished(), worker.output[-3000:])
            time.sleep(0.2)
        resumed_in = time.monotonic() - back_at
        worker.wait_for_output("listener reconnected", timeout=deadline - time.monotonic())
        listening_in = time.monotonic() - back_at

    jobs = asyncio.run(sql(f'SELECT id FROM "{schema}".jobs'))
    ledger = asyncio.run(sql(f'SELECT job_id, attempt FROM "{schema}".ledger'))
    assert len(jobs) == BEFORE + DURING + 1  # + the one the API accepted after the return
    # Every job ran, and exactly once: nothing lost, nothing claimed twice.
    assert sorted(r["job_id"] for r in ledger) == sorted(r["id"] for r in jobs)
    assert worker.stop() == 0
    assert api.stop() == 0
    slowest = max(answers, key=lambda answer: answer[1])
    print(
        f"\nblack hole for {cut_for:.1f}s: {len(answers)} API requests, all 503, slowest "
        f"{slowest[0]} in {slowest[1]:.2f}s; {len(jobs)} jobs. Network back: API 201 after "
        f"{api_back_in:.2f}s, all jobs completed after {resumed_in:.2f}s, LISTEN again "
        f"after <{listening_in:.2f}s"
    )


def kernel_blackhole_available() -> bool:
    """Root, ``unshare`` and tc's ``blackhole`` qdisc: a network namespace whose loopback
    can be made to drop every packet."""
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("tc")):
        return False
    probe = ["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root", "blackhole"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def test_tcp_options_notice_a_link_that_drops_packets(pg_dsn: str, tmp_path: Path) -> None:
    """With the default settings, a connection whose packets the kernel loses fails by
    itself: the query in flight, the idle connection and a new attempt each end in an
    error, none waits for the ~15 minutes of TCP retransmissions."""
    if not kernel_blackhole_available():
        pytest.skip("needs root, unshare and tc's blackhole qdisc")
    target = urlsplit(pg_dsn)
    assert target.hostname
    socket_path = tmp_path / "pg.sock"
    bridge = NetProxy((target.hostname, target.port or 5432), listen_unix=str(socket_path))
    try:
        probe = subprocess.run(
            [
                "unshare",
                "--net",
                sys.executable,
                "-m",
                "tests.faults.netprobe",
                str(socket_path),
                pg_dsn,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=90,
        )
    finally:
        bridge.close()
    assert probe.returncode == 0, probe.stderr
    figures = json.loads(probe.stdout)
    slack = 3.0
    # In flight: its bytes go unacknowledged, TCP_USER_TIMEOUT drops the connection
    # (long before the 30 s statement timeout).
    assert figures["query_error"].startswith("ConnectionDoesNotExistError"), figures
    assert figures["query"] < pool.USER_TIMEOUT + slack, figures
    # Idle: keepalive probes go unanswered.
    assert figures["idle"] < pool.KEEPALIVE_IDLE + pool.KEEPALIVE_INTERVAL + slack, figures
    assert figures["connect_error"].startswith("TimeoutError"), figures
    assert figures["connect"] < pool.CONNECT_TIMEOUT + slack, figures
    assert figures["query_after_return"] < 1, figures
    print(f"\nkernel-level black hole: {figures}")
