"""A soak (docs/soak.md): a fixed load for a given time, to show that nothing drifts.

    python bench/soak.py                       # 30 minutes at 500 jobs/s
    python bench/soak.py --minutes 5 --rate 200 --retention 2
    pip install -e '.[bench]'                  # matplotlib, for the PNG

An API process takes every enqueue over HTTP; two worker processes run them, with
retention of ``--retention`` minutes and a metrics scrape of every process every 15 s.
Of the jobs offered, 90% succeed, 5% fail once and succeed on their retry, 4% are slow
(1 to 5 s) and 1% are workflows of three jobs. Every minute it records pickup p50 and
p99, each process's RSS and open files, the server's connections, the size of each of
jobqueue's tables and indexes, their dead tuples and autovacuum runs, and the HTTP
errors; it writes them to ``--out``/soak.csv and draws ``--out``/soak.png. It ends
with the pass criteria, one line each, and a last line ``soak: PASS`` or
``soak: FAIL <criteria missed>`` (exit 0 or 1).

On DATABASE_URL, or an embedded server of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "src"))

from jobqueue.db.embedded import EmbeddedPostgres  # noqa: E402

SCRAPE_EVERY = 15.0
CONNECTIONS = 64  # requests in flight at most
WORKERS = 2
SLOTS = 100  # per worker process: the slow jobs alone hold about 60 at 500 jobs/s
PICKUP_P99_RATIO = 1.2
RSS_GROWTH = 0.10
SIZE_GROWTH = 0.10


@dataclass
class Load:
    """What the load generator sent, and how it was answered."""

    ids: list[int] = field(default_factory=list)
    answered: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    sent_per_minute: dict[int, int] = field(default_factory=lambda: defaultdict(int))

    @property
    def errors(self) -> int:
        return sum(n for status, n in self.answered.items() if not status.startswith("2"))

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.answered.items() if status[0] in "5x")


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    metrics: str


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--rate", type=float, default=500, help="jobs offered per second")
    parser.add_argument("--retention", type=float, default=10, help="minutes")
    parser.add_argument("--out", type=Path, default=Path("soak-out"))
    args = parser.parse_args()
    embedded = None
    dsn = os.environ.get("DATABASE_URL")
    if not dsn:
        embedded = EmbeddedPostgres(Path.home() / ".cache" / "jobqueue-bench" / "soak-pg")
        dsn = embedded.start()
    schema = f"soak_{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "JOBQUEUE_SCHEMA": schema,
        "JOBQUEUE_APP": "soak_app:jq",
        "JOBQUEUE_RETAIN_COMPLETED": str(round(args.retention * 60)),
        "JOBQUEUE_LOG_LEVEL": "error",  # a retried job is a warning: 25 a second here
        "PYTHONPATH": f"{BENCH}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    # SIGTERM (a timeout, a CI's cancel) ends the soak as Ctrl-C does: through the
    # finally below, which stops the processes it started and drops its schema.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    subprocess.run([*JOBQUEUE, "migrate"], env=env, check=True, stdout=subprocess.DEVNULL)
    processes: list[Process] = []
    try:
        port = started(env, processes)
        return asyncio.run(soak(dsn, schema, port, processes, args))
    finally:
        for process in processes:
            process.popen.terminate()
        for process in processes:
            process.popen.wait(60)
        asyncio.run(dropped(dsn, schema))
        if embedded is not None:
            embedded.stop()


JOBQUEUE = [sys.executable, "-m", "jobqueue"]


def started(env: dict[str, str], processes: list[Process]) -> int:
    """The API process's port; it and the worker processes, each serving its metrics,
    are added to ``processes`` as they start."""
    port = free_port()
    api = subprocess.Popen([*JOBQUEUE, "api"], env={**env, "PORT": str(port)})
    processes.append(Process("api", api, f"http://127.0.0.1:{port}/metrics"))
    for i in range(WORKERS):
        metrics = free_port()
        command = [
            *JOBQUEUE,
            "worker",
            "--worker-count",
            str(SLOTS),
            "--metrics-port",
            str(metrics),
        ]
        worker = subprocess.Popen(command, env=env)
        processes.append(Process(f"worker{i + 1}", worker, f"http://127.0.0.1:{metrics}/metrics"))
    return port


async def soak(
    dsn: str, schema: str, port: int, processes: list[Process], args: argparse.Namespace
) -> int:
    db = await asyncpg.connect(dsn)
    await db.execute(f'CREATE TABLE "{schema}".soak_ledger (job_id bigint NOT NULL)')
    server = await db.fetchval("SELECT current_setting('server_version')")
    autovacuum = await db.fetchval("SELECT current_setting('autovacuum')")
    print(f"[soak] PostgreSQL {server}, autovacuum {autovacuum}", file=sys.stderr)
    if autovacuum != "on":
        # Nothing then reclaims the rows that claims, completions and retention leave
        # dead: the tables grow without bound, whatever jobqueue does.
        print("[soak] autovacuum is off on this server: the table sizes will grow",
              file=sys.stderr)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    rows: list[tuple[int, str, str, float]] = []
    pickups: dict[int, list[float]] = {}
    load = Load()
    try:
        await until_up(base)
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            began = time.monotonic()
            duration = args.minutes * 60
            generating = asyncio.create_task(offer(port, args.rate, began, duration, load))
            scraping = asyncio.create_task(scrape(client, processes, load))
            try:
                await sample(db, schema, processes, load, began, args.minutes, rows, pickups)
                await generating
            finally:
                for task in (generating, scraping):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        lost = await drained(db, schema, load.ids)
    finally:
        await db.close()
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "soak.csv", rows)
    drawn = draw(args.out / "soak.png", rows)
    verdicts = judge(rows, pickups, load, lost, args.minutes, args.retention)
    print(
        f"soak: {args.minutes:g} min at {args.rate:g} jobs/s offered; {len(load.ids):,} jobs "
        f"enqueued; {args.out / 'soak.csv'}" + (f", {drawn}" if drawn else "")
    )
    for ok, line in verdicts:
        print(f"  [{'pass' if ok else 'FAIL'}] {line}")
    missed = [line.split(":")[0] for ok, line in verdicts if not ok]
    print("soak: PASS" if not missed else f"soak: FAIL {'; '.join(missed)}")
    return 0 if not missed else 1


# -- the load -----------------------------------------------------------------------------


def job_of(rng: random.Random) -> tuple[str, dict[str, Any]]:
    """The next job offered: the request's path and body, by the soak's mix."""
    draw_ = rng.random()
    if draw_ < 0.90:
        return "/jobs", {"type": "ok", "payload": {"n": rng.randrange(10**6)}}
    if draw_ < 0.95:
        return "/jobs", {"type": "flaky", "max_attempts": 3}
    if draw_ < 0.99:
        return "/jobs", {"type": "slow", "payload": {"seconds": rng.uniform(1, 5)}}
    chain = [
        {"ref": "a", "type": "ok"},
        {"ref": "b", "type": "ok", "depends_on": ["a"]},
        {"ref": "c", "type": "ok", "depends_on": ["a"]},
    ]
    return "/workflows", {"name": "soak", "jobs": chain}


async def offer(port: int, rate: float, started: float, duration: float, load: Load) -> None:
    """Open loop: one job every 1/rate seconds, whatever the answers' pace, over
    CONNECTIONS keep-alive connections."""
    pool: asyncio.Queue[Connection] = asyncio.Queue()
    for _ in range(CONNECTIONS):
        pool.put_nowait(await Connection.opened(port))
    rng, sending = random.Random(7), set()
    sent = 0
    while (now := time.monotonic()) < started + duration:
        path, body = job_of(rng)
        connection = await pool.get()
        task = asyncio.create_task(send(connection, path, body, pool, load))
        sending.add(task)
        task.add_done_callback(sending.discard)
        load.sent_per_minute[int((now - started) // 60)] += 1
        sent += 1
        await asyncio.sleep(max(0.0, started + sent / rate - time.monotonic()))
    await asyncio.gather(*sending)
    while not pool.empty():
        pool.get_nowait().close()


async def send(
    connection: Connection,
    path: str,
    body: dict[str, Any],
    pool: asyncio.Queue[Connection],
    load: Load,
) -> None:
    try:
        status, answer = await connection.post(path, json.dumps(body).encode())
    except (OSError, asyncio.IncompleteReadError, ValueError):
        load.answered["transport error"] += 1
        connection.close()
        connection = await Connection.opened(connection.port)
        return
    finally:
        pool.put_nowait(connection)
    load.answered[str(status)] += 1
    if status == 201:
        created = json.loads(answer)
        jobs = created["jobs"] if path == "/workflows" else [created]
        load.ids.extend(job["id"] for job in jobs)


class Connection:
    """A keep-alive HTTP/1.1 connection to the API, one request at a time. The load
    shares two cores with what it measures, and httpx spent more CPU per request than
    the API itself did; this reads a status line, headers and a Content-Length body."""

    def __init__(self, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.port, self._reader, self._writer = port, reader, writer

    @classmethod
    async def opened(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(port, reader, writer)

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n")  # fmt: skip
        self._writer.write(head.encode() + body)
        status = int((await self._reader.readline()).split()[1])
        length = 0
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, await self._reader.readexactly(length)

    def close(self) -> None:
        self._writer.close()


async def scrape(client: httpx.AsyncClient, processes: list[Process], load: Load) -> None:
    """Every process's metrics, every SCRAPE_EVERY seconds, as Prometheus would."""
    while True:
        await asyncio.sleep(SCRAPE_EVERY)
        for process in processes:
            try:
                answer = await client.get(process.metrics)
                load.answered[f"{answer.status_code} (scrape)"] += 1
            except httpx.HTTPError:
                load.answered["transport error (scrape)"] += 1


# -- what is recorded every minute --------------------------------------------------------


async def sample(
    db: asyncpg.Connection,
    schema: str,
    processes: list[Process],
    load: Load,
    started: float,
    minutes: float,
    rows: list[tuple[int, str, str, float]],
    pickups: dict[int, list[float]],
) -> None:
    last = await db.fetchval("SELECT now()")
    for minute in range(1, int(minutes) + 1):
        await asyncio.sleep(max(0.0, started + minute * 60 - time.monotonic()))
        now = await db.fetchval("SELECT now()")
        found = await db.fetch(
            f"""SELECT EXTRACT(epoch FROM started_at - run_at)::float8 AS s FROM "{schema}".jobs
                WHERE started_at >= $1 AND started_at < $2 AND workflow_id IS NULL""",
            last,
            now,
        )
        last = now
        pickups[minute] = [r["s"] for r in found]
        quantiles = statistics.quantiles(pickups[minute], n=100) if len(found) > 1 else [0.0] * 99
        rows.append((minute, "pickup_p50_ms", "", quantiles[49] * 1000))
        rows.append((minute, "pickup_p99_ms", "", quantiles[98] * 1000))
        rows.append((minute, "offered", "", load.sent_per_minute[minute - 1]))
        rows.append((minute, "http_errors", "", load.errors))
        for process in processes:
            rss, fds = usage(process.popen.pid)
            rows.append((minute, "rss_mib", process.name, rss))
            rows.append((minute, "open_files", process.name, fds))
        connections = await db.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        )
        rows.append((minute, "server_connections", "", connections))
        for r in await db.fetch(
            """SELECT c.relname, c.relkind::text AS relkind, pg_relation_size(c.oid) AS bytes,
                      s.n_dead_tup, s.autovacuum_count
               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
               WHERE n.nspname = $1 AND c.relkind IN ('r', 'i', 'p')
                 AND c.relname NOT LIKE 'soak\\_ledger%'""",
            schema,
        ):
            kind = "table" if r["relkind"] in "rp" else "index"
            rows.append((minute, f"{kind}_mib", r["relname"], r["bytes"] / 2**20))
            if kind == "table":
                rows.append((minute, "dead_tuples", r["relname"], r["n_dead_tup"] or 0))
                rows.append((minute, "autovacuum_runs", r["relname"], r["autovacuum_count"] or 0))
        completed = await db.fetchval(f'SELECT count(*) FROM "{schema}".soak_ledger')
        rows.append((minute, "completed", "", completed))
        print(
            f"[soak] minute {minute}: pickup p99 {quantiles[98] * 1000:.1f} ms, "
            f"{completed:,} done, {load.errors} errors",
            file=sys.stderr,
        )


def usage(pid: int) -> tuple[float, int]:
    """A process's RSS (MiB) and open file descriptors, from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return rss / 1024, len(os.listdir(f"/proc/{pid}/fd"))


async def drained(db: asyncpg.Connection, schema: str, ids: list[int], timeout: float = 120) -> int:
    """Jobs enqueued that never reached the ledger, once the load has stopped."""
    deadline = time.monotonic() + timeout
    while True:
        done = await db.fetchval(
            f'SELECT count(DISTINCT job_id) FROM "{schema}".soak_ledger WHERE job_id = ANY($1)', ids
        )
        if done == len(set(ids)) or time.monotonic() > deadline:
            return len(set(ids)) - int(done)
        await asyncio.sleep(1)


# -- the verdict ------------------------------------------------------------------------


def judge(
    rows: list[tuple[int, str, str, float]],
    pickups: dict[int, list[float]],
    load: Load,
    lost: int,
    minutes: float,
    retention: float,
) -> list[tuple[bool, str]]:
    """Each pass criterion (docs/soak.md): whether it held, and a line saying so."""
    verdicts = []
    window = max(1, min(10, int(minutes) // 3))
    last_minute = max(pickups)
    first = p99([s for m in range(1, window + 1) for s in pickups.get(m, [])])
    last = p99(
        [s for m in range(last_minute - window + 1, last_minute + 1) for s in pickups.get(m, [])]
    )
    verdicts.append(
        (
            last <= PICKUP_P99_RATIO * first,
            f"pickup p99: last {window} min {last * 1000:.1f} ms, first {window} min "
            f"{first * 1000:.1f} ms ({last / first:.2f}x; at most {PICKUP_P99_RATIO}x)",
        )
    )
    steady = int(retention) + 1  # from then on, retention deletes as fast as jobs come
    if last_minute - window + 1 > steady + window - 1:
        running = p99([s for m in range(steady, steady + window) for s in pickups.get(m, [])])
        verdicts.append((True, f"(told, not judged) pickup p99 once retention runs: last {window} "
                               f"min against minutes {steady}-{steady + window - 1}: "
                               f"{last / running:.2f}x"))  # fmt: skip
    settled = max(1, min(5, int(minutes) // 6))
    for name, series in by_subject(rows, "rss_mib").items():
        base, peak = series[settled], max(v for m, v in series.items() if m >= settled)
        verdicts.append(
            (
                peak < base * (1 + RSS_GROWTH),
                f"RSS of {name}: {base:.1f} MiB at minute {settled}, at most {peak:.1f} "
                f"after ({peak / base - 1:+.1%}; under +{RSS_GROWTH:.0%})",
            )
        )
    size = total_by_minute(rows, ("table_mib", "index_mib"))
    since = int(retention) + 10
    if max(size) >= since + 5:
        start, peak = size[since], max(v for m, v in size.items() if m >= since)
        verdicts.append(
            (
                peak < start * (1 + SIZE_GROWTH),
                f"table sizes: {start:.1f} MiB at minute {since} (retention + 10), at most "
                f"{peak:.1f} after ({peak / start - 1:+.1%}; under +{SIZE_GROWTH:.0%})",
            )
        )
    else:
        verdicts.append((True, f"table sizes: not judged: the run ends before minute {since + 5}"))
    verdicts.append(
        (
            load.server_errors == 0,
            f"no HTTP 5xx: {load.server_errors} 5xx or unanswered of "
            f"{sum(load.answered.values()):,} requests ({dict(load.answered)})",
        )
    )
    verdicts.append((lost == 0, f"no job lost: {lost} of {len(set(load.ids)):,} not in the ledger"))
    return verdicts


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else 0.0


def by_subject(rows: list[tuple[int, str, str, float]], series: str) -> dict[str, dict[int, float]]:
    found: dict[str, dict[int, float]] = defaultdict(dict)
    for minute, name, subject, value in rows:
        if name == series:
            found[subject][minute] = value
    return found


def total_by_minute(
    rows: list[tuple[int, str, str, float]], series: tuple[str, ...]
) -> dict[int, float]:
    found: dict[int, float] = defaultdict(float)
    for minute, name, _, value in rows:
        if name in series:
            found[minute] += value
    return found


# -- what it writes -----------------------------------------------------------------------


def write_csv(path: Path, rows: list[tuple[int, str, str, float]]) -> None:
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["minute", "series", "subject", "value"])
        out.writerows(rows)


def draw(path: Path, rows: list[tuple[int, str, str, float]]) -> Path | None:
    """One PNG of the main series; None without matplotlib (the bench extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("[soak] no matplotlib: no PNG (pip install -e '.[bench]')", file=sys.stderr)
        return None
    fig, axes = plt.subplots(2, 2, figsize=(12, 7), sharex=True)
    pickup, rss, sizes, flow = axes.flat
    for series in ("pickup_p50_ms", "pickup_p99_ms"):
        points = by_subject(rows, series)[""]
        pickup.plot(list(points), list(points.values()), label=series.removeprefix("pickup_"))
    pickup.set(title="pickup (ms)", ylim=(0, None))
    pickup.legend()
    for name, points in by_subject(rows, "rss_mib").items():
        rss.plot(list(points), list(points.values()), label=name)
    rss.set(title="RSS (MiB)", ylim=(0, None))
    rss.legend()
    total = total_by_minute(rows, ("table_mib", "index_mib"))
    sizes.plot(list(total), list(total.values()), label="all tables and indexes")
    jobs = by_subject(rows, "table_mib").get("jobs", {})
    sizes.plot(list(jobs), list(jobs.values()), label="jobs table")
    sizes.set(title="size (MiB)", ylim=(0, None), xlabel="minute")
    sizes.legend()
    done = by_subject(rows, "completed")[""]
    offered = by_subject(rows, "offered")[""]
    minutes = sorted(done)
    flow.plot(minutes, [offered[m] / 60 for m in minutes], label="offered")
    flow.plot(minutes, [(done[m] - done.get(m - 1, 0)) / 60 for m in minutes], label="done")
    flow.set(title="jobs per second; dead tuples in jobs", ylim=(0, None), xlabel="minute")
    flow.legend(loc="lower left")
    dead = by_subject(rows, "dead_tuples").get("jobs", {})
    twin = flow.twinx()
    twin.plot(list(dead), [v / 1000 for v in dead.values()], color="grey", linestyle=":",
              label="dead tuples in jobs (thousands)")  # fmt: skip
    twin.set(ylim=(0, None))
    twin.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


# -- helpers ------------------------------------------------------------------------------


async def dropped(dsn: str, schema: str) -> None:
    db = await asyncpg.connect(dsn)
    try:
        await db.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await db.close()


async def until_up(base: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as client:
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(f"{base}/healthz")).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise SystemExit(f"soak: the API at {base} did not come up")
            await asyncio.sleep(0.2)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


if __name__ == "__main__":
    sys.exit(main())
