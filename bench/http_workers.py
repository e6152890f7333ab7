"""Workers over HTTP (docs/http-workers.md), run by bench/run.py when `--only` names
`http_workers`, through both clients' workers against `jobqueue api`:

- `http_worker_drain`: no-op jobs per second through the Go client's worker
  (clients/go/cmd/worker, concurrency 50: batched claims, heartbeats and outcomes;
  its handlers return nothing, as drain_1proc's do),
  and `http_worker_drain_ratio` against `drain_1proc` when it ran in the same round;
  `http_worker_drain_ts` (and its ratio) the same through the TypeScript client's
  (clients/typescript, its test fixture worker);
- `http_worker_api_cpu_per_1000_jobs_ms` (`_ts`): the API process's CPU per 1,000 jobs
  worked;
- `http_worker_pickup` (`_ts`): from an enqueue's request sent to the handler starting
  in a worker waiting on a long poll, p50 and p99 in ms (the handler prints the time
  it starts; the bench and the worker read one clock).

Go comes from Debian's golang-go, Node.js and npm from Debian's nodejs and npm; each
worker is built once per run (the TypeScript client's dependencies with `npm ci`
when it has none).
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
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import asyncpg
import httpx

HERE = Path(__file__).resolve().parent
CLIENT = HERE.parent / "clients" / "go"
TS_CLIENT = HERE.parent / "clients" / "typescript"
SCHEMA = "jobqueue"
CONCURRENCY = 50
PICKUPS = 50

# A worker's command line, given the API's address, its queue and its mode.
Command = Callable[[str, str, str], list[str]]


def http_worker_figures(dsn: str, runs: int, scale: float) -> dict[str, Any]:
    jobs = max(500, int(20_000 * scale))
    with tempfile.TemporaryDirectory(prefix="jqbench-go-") as tmp:
        clients = {"": go_worker(build_worker(Path(tmp))), "_ts": ts_worker(build_ts_worker())}
        figures: dict[str, Any] = {}
        for suffix, command in clients.items():
            rates, cpu, pickups = [], [], []
            for i in range(runs):
                name = "go" if not suffix else "typescript"
                print(
                    f"[bench] jobqueue: http_workers ({name}) run {i + 1}/{runs}", file=sys.stderr
                )
                port = free_port()
                env = {**os.environ, "DATABASE_URL": dsn, "PORT": str(port),
                       "JOBQUEUE_LOG_LEVEL": "warning"}  # fmt: skip
                api = subprocess.Popen([sys.executable, "-m", "jobqueue", "api"], env=env)
                try:
                    wait_http(f"http://127.0.0.1:{port}/healthz", api)
                    token = asyncio.run(work_token(dsn))
                    rate, cpu_ms = drain(dsn, command, port, api.pid, jobs, token)
                    rates.append(rate)
                    cpu.append(cpu_ms)
                    pickups.extend(pickup(command, port, token))
                finally:
                    api.terminate()
                    api.wait(30)
            pickups.sort()
            figures.update({
                f"http_worker_drain{suffix}": round(statistics.median(rates), 2),
                f"http_worker_api_cpu_per_1000_jobs_ms{suffix}": round(statistics.median(cpu), 1),
                f"http_worker_pickup{suffix}": {
                    "p50_ms": round(statistics.median(pickups), 2),
                    "p99_ms": round(pickups[int(len(pickups) * 0.99) - 1], 2),
                },
            })  # fmt: skip
    return figures


def go_worker(binary: Path) -> Command:
    def command(url: str, queue: str, mode: str) -> list[str]:
        return [str(binary), "-url", url, "-queue", queue, "-type", "noop", "-mode", mode,
                "-concurrency", str(CONCURRENCY), "-wait", "1"]  # fmt: skip

    return command


def ts_worker(script: Path) -> Command:
    def command(url: str, queue: str, mode: str) -> list[str]:
        return ["env", f"JOBQUEUE_URL={url}", f"WORKER_QUEUE={queue}", "WORKER_TYPE=noop",
                f"WORKER_MODE={'record' if mode == 'echo' else mode}",
                f"WORKER_CONCURRENCY={CONCURRENCY}", "node", str(script)]  # fmt: skip

    return command


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


def build_ts_worker() -> Path:
    """The TypeScript client's test worker, compiled (build/, ignored by git)."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise SystemExit("http_workers needs Node.js: apt-get install nodejs npm")
    if not (TS_CLIENT / "node_modules").is_dir():
        subprocess.run([npm, "ci", "--silent"], cwd=TS_CLIENT, check=True)
    subprocess.run([npm, "run", "--silent", "build:test"], cwd=TS_CLIENT, check=True)
    return TS_CLIENT / "build" / "test" / "fixtures" / "worker.js"


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
    dsn: str, command: Command, port: int, api_pid: int, jobs: int, token: str
) -> tuple[float, float]:
    """Jobs per second for ``jobs`` no-op jobs stored beforehand, from the worker's start
    to the last completion; and the API's CPU milliseconds per 1,000 jobs meanwhile."""
    asyncio.run(fill(dsn, jobs))
    before = cpu_seconds(api_pid)
    started = time.perf_counter()
    run = subprocess.Popen(
        command(f"http://127.0.0.1:{port}", "httpbench", "noop"),
        stdout=subprocess.DEVNULL,
        env={**os.environ, "JOBQUEUE_TOKEN": token},
    )
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
        # The last round's rows, dead: where autovacuum is off (or late), each round
        # would drain through more of them than the one before, and a figure measured
        # later in a run would come out slower for it.
        await conn.execute(f"VACUUM {SCHEMA}.jobs")
        await conn.execute(
            f"INSERT INTO {SCHEMA}.jobs (type, queue) "
            "SELECT 'noop', 'httpbench' FROM generate_series(1, $1)",
            jobs,
        )
    finally:
        await conn.close()


async def until_done(dsn: str, jobs: int) -> None:
    """Until no job of the bench's queue is pending or running: two index probes every
    10 ms, as drain_1proc's harness polls (a count of the queue's unfinished jobs
    read every row of it each time, taking a share of the CPU the drain was measured
    on)."""
    conn = await asyncpg.connect(dsn)
    try:
        query = f"""SELECT (SELECT id FROM {SCHEMA}.jobs
                            WHERE status = 'pending' AND queue = 'httpbench'
                            ORDER BY queue, priority, run_at, id LIMIT 1) IS NOT NULL
                        OR (SELECT id FROM {SCHEMA}.jobs
                            WHERE status = 'running' AND queue = 'httpbench'
                            ORDER BY lease_expires_at LIMIT 1) IS NOT NULL"""
        while await conn.fetchval(query):  # noqa: ASYNC110 (a poll of the database)
            await asyncio.sleep(0.01)
        left = await conn.fetchval(
            f"SELECT count(*) FROM {SCHEMA}.jobs WHERE queue = 'httpbench' "
            "AND status <> 'completed'"
        )
        if left:
            raise RuntimeError(f"http_worker_drain: {left} of {jobs} jobs did not complete")
    finally:
        await conn.close()


def pickup(command: Command, port: int, token: str) -> list[float]:
    """ms from sending an enqueue to the handler starting, one job at a time, in a worker
    whose claim waits on its long poll meanwhile (as it prints, ``started <id> <time>``:
    in ns for Go, ms for TypeScript)."""
    base = f"http://127.0.0.1:{port}"
    worker = subprocess.Popen(
        command(base, "httppickup", "stamp"),
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "JOBQUEUE_TOKEN": token},
    )
    assert worker.stdout is not None
    found = []
    try:
        with httpx.Client(base_url=base, timeout=30) as client:
            client.headers["Authorization"] = f"Bearer {token}"
            # A first job, not counted: the worker's start (Node.js's takes a few hundred
            # ms) is not a pickup.
            first = client.post("/jobs", json={"type": "noop", "queue": "httppickup"})
            started_at(worker.stdout, first.json()["id"])
            for _ in range(PICKUPS):
                time.sleep(0.05)  # the worker's claim is waiting on its LISTEN
                sent = time.time()
                answer = client.post("/jobs", json={"type": "noop", "queue": "httppickup"})
                job_id = answer.json()["id"]
                started = started_at(worker.stdout, job_id)
                found.append((started - sent) * 1000)
    finally:
        worker.terminate()
        worker.wait(30)
    return found


def started_at(lines: IO[str], job_id: int) -> float:
    """When the worker's handler started ``job_id``, in seconds since the epoch."""
    for line in lines:
        words = line.split()
        if len(words) == 3 and words[0] == "started" and words[1] == str(job_id):
            stamp = float(words[2])
            return stamp / 1e9 if stamp > 1e15 else stamp / 1000
    raise RuntimeError(f"the worker ended before it started job {job_id}")


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
