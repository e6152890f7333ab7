"""Workers over HTTP (docs/http-workers.md), run by bench/run.py when `--only` names
`http_workers`:

- `http_worker_drain`: no-op jobs per second through the Go client's worker
  (clients/go/cmd/worker, concurrency 50: batched claims, heartbeats and outcomes)
  against `jobqueue api`, and `http_worker_drain_ratio` against `drain_1proc` when it
  ran in the same round;
- `http_worker_api_cpu_per_1000_jobs_ms`: the API process's CPU per 1,000 jobs worked;
- `http_worker_pickup`: from an enqueue's request sent to a waiting claim's answer
  (a long poll, woken by the API process's LISTEN), p50 and p99 in ms.

Go comes from Debian's golang-go; the worker is built once per run, offline.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx

HERE = Path(__file__).resolve().parent
CLIENT = HERE.parent / "clients" / "go"
SCHEMA = "jobqueue"
CONCURRENCY = 50
PICKUPS = 50


def http_worker_figures(dsn: str, runs: int, scale: float) -> dict[str, Any]:
    jobs = max(500, int(20_000 * scale))
    with tempfile.TemporaryDirectory(prefix="jqbench-go-") as tmp:
        worker = build_worker(Path(tmp))
        rates, cpu, pickups = [], [], []
        for i in range(runs):
            print(f"[bench] jobqueue: http_workers run {i + 1}/{runs}", file=sys.stderr)
            port = free_port()
            env = {**os.environ, "DATABASE_URL": dsn, "PORT": str(port),
                   "JOBQUEUE_LOG_LEVEL": "warning"}  # fmt: skip
            api = subprocess.Popen([sys.executable, "-m", "jobqueue", "api"], env=env)
            try:
                wait_http(f"http://127.0.0.1:{port}/healthz", api)
                token = asyncio.run(work_token(dsn))
                rate, cpu_ms = drain(dsn, worker, port, api.pid, jobs, token)
                rates.append(rate)
                cpu.append(cpu_ms)
                pickups.extend(asyncio.run(pickup(port, token)))
            finally:
                api.terminate()
                api.wait(30)
    pickups.sort()
    return {
        "http_worker_drain": round(statistics.median(rates), 2),
        "http_worker_api_cpu_per_1000_jobs_ms": round(statistics.median(cpu), 1),
        "http_worker_pickup": {
            "p50_ms": round(statistics.median(pickups), 2),
            "p99_ms": round(pickups[int(len(pickups) * 0.99) - 1], 2),
        },
    }


def build_worker(tmp: Path) -> Path:
    go = shutil.which("go")
    if go is None:
        raise SystemExit("http_workers needs Go: apt-get install golang-go")
    binary = tmp / "jobqueue-go-worker"
    env = {**os.environ, "GOCACHE": str(tmp / "cache"), "GOPATH": str(tmp / "path"),
           "GOTOOLCHAIN": "local", "GOPROXY": "off", "GOFLAGS": "", "CGO_ENABLED": "0"}  # fmt: skip
    subprocess.run(
        [go, "build", "-o", str(binary), "./cmd/worker"], cwd=CLIENT, env=env, check=True
    )
    return binary


async def work_token(dsn: str) -> str:
    """A token for the worker and the pickups: once one exists, the API needs one."""
    from jobqueue.auth.tokens import new_token
    from jobqueue.db.store import Store

    stored, secret = new_token(
        name=f"bench-http-{os.getpid()}-{time.monotonic_ns()}",
        scopes=["jobs:work", "jobs:enqueue"],
    )
    conn = await asyncpg.connect(dsn)
    try:
        await Store(conn, SCHEMA).token_create(token=stored, expires_in_seconds=3600)
    finally:
        await conn.close()
    return secret


def drain(
    dsn: str, worker: Path, port: int, api_pid: int, jobs: int, token: str
) -> tuple[float, float]:
    """Jobs per second for ``jobs`` no-op jobs stored beforehand, from the worker's start
    to the last completion; and the API's CPU milliseconds per 1,000 jobs meanwhile."""
    asyncio.run(fill(dsn, jobs))
    before = cpu_seconds(api_pid)
    started = time.perf_counter()
    run = subprocess.Popen(
        [str(worker), "-url", f"http://127.0.0.1:{port}", "-queue", "httpbench",
         "-type", "noop", "-mode", "echo", "-concurrency", str(CONCURRENCY), "-wait", "1"],
        stdout=subprocess.DEVNULL,
        env={**os.environ, "JOBQUEUE_TOKEN": token},
    )  # fmt: skip
    try:
        asyncio.run(until_done(dsn, jobs))
        seconds = time.perf_counter() - started
    finally:
        run.terminate()
        run.wait(30)
    return jobs / seconds, (cpu_seconds(api_pid) - before) * 1000 / (jobs / 1000)


async def fill(dsn: str, jobs: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f"DELETE FROM {SCHEMA}.jobs WHERE queue = 'httpbench'")
        await conn.execute(
            f"INSERT INTO {SCHEMA}.jobs (type, queue) "
            "SELECT 'noop', 'httpbench' FROM generate_series(1, $1)",
            jobs,
        )
    finally:
        await conn.close()


async def until_done(dsn: str, jobs: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        query = (
            f"SELECT count(*) FROM {SCHEMA}.jobs WHERE queue = 'httpbench' "
            "AND status <> 'completed'"
        )
        left = await conn.fetchval(query)
        while left:
            await asyncio.sleep(0.01)
            left = await conn.fetchval(query)
    finally:
        await conn.close()


async def pickup(port: int, token: str) -> list[float]:
    """ms from sending an enqueue to a waiting claim's answer, one job at a time."""
    base = f"http://127.0.0.1:{port}"
    found = []
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, timeout=30, headers=headers) as client:
        order = {"worker": "pickup", "queues": ["httppickup"], "wait_seconds": 10}
        for _ in range(PICKUPS):
            waiting = asyncio.create_task(client.post("/claims", json=order))
            await asyncio.sleep(0.05)  # the claim is waiting on its LISTEN
            started = time.perf_counter()
            await client.post("/jobs", json={"type": "noop", "queue": "httppickup"})
            [job] = (await waiting).json()["jobs"]
            found.append((time.perf_counter() - started) * 1000)
            await client.post(f"/jobs/{job['id']}/complete", json={"lease": job["lease"]})
    return found


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_http(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the API exited: {proc.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"the API did not answer at {url}")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
