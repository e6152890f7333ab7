"""`jobqueue bench`: the same workload for jobqueue and its peers, in one run, on one machine.

Every system has a runner script (bench/jobqueue_runner.py, bench/peers/*_runner.py) that
speaks the protocol of bench/harness.py; this file only orchestrates: a database per
system, the peers' virtualenvs, three runs of each workload, medians, the table and the
JSON. It is not a test: nothing here asserts a time.

    jobqueue bench                                   # jobqueue alone
    jobqueue bench --compare pgqueuer,procrastinate  # peers measured in the same run
    jobqueue bench --quick --json                    # a tenth of each workload, as JSON
    jobqueue bench --only pressure --runs 1          # a held xmin at 200 jobs/s, ~4 minutes
    jobqueue bench --only limits                     # what shared limits cost (bench/limits.py)
    jobqueue bench --only drain_1proc,workflow_fanout,workflow_chain,workflow_release
    jobqueue bench --only drain_1proc,drain_50types,drain_any_type   # the claim's type filter
    jobqueue bench --only drain_1proc,http_workers   # workers over HTTP (Go, TypeScript clients)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import runpy
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "jobqueue-bench"

# Peers at the versions of ../shared/PEERS.md, each in a virtualenv of its own.
PEERS = {
    "pgqueuer": ["pgqueuer==1.6.0", "asyncpg>=0.29,<0.33"],
    "procrastinate": ["procrastinate==3.10.0", "psycopg[binary]>=3.1,<4"],
}


@dataclass(frozen=True)
class Workload:
    key: str
    command: str
    args: tuple[str, ...]
    result: str  # the runner output field reported
    unit: str
    jobqueue_only: bool = False
    named_only: bool = False  # run only when --only names it (minutes long)


def workloads(scale: float) -> list[Workload]:
    def n(count: int) -> str:
        return str(max(1, int(count * scale)))

    return [
        Workload("enqueue_single", "enqueue_single", ("--n", n(10_000)), "rate", "jobs/s"),
        Workload("raw_insert", "raw_insert", ("--n", n(10_000)), "rate", "jobs/s",
                 jobqueue_only=True),
        Workload("enqueue_concurrent", "enqueue_concurrent", ("--n", n(10_000), "--clients", "16"),
                 "rate", "jobs/s"),
        Workload("enqueue_bulk", "enqueue_bulk", ("--n", n(50_000), "--batch", "1000"), "rate",
                 "jobs/s"),
        Workload("raw_copy", "raw_copy", ("--n", n(50_000), "--batch", "1000"), "rate",
                 "jobs/s", jobqueue_only=True),
        Workload("drain_1proc", "drain", ("--n", n(50_000), "--processes", "1"), "rate", "jobs/s"),
        # The drain's floor: claim.sql and complete.sql alone, 500 at a time, one connection.
        Workload("sql_floor", "sql_floor", ("--n", n(50_000), "--batch", "500"), "rate", "jobs/s",
                 jobqueue_only=True),
        # drain_1proc with Prometheus metrics on, run right after it in every round.
        Workload("drain_1proc_metrics", "drain_metrics", ("--n", n(50_000), "--processes", "1"),
                 "rate", "jobs/s", jobqueue_only=True),
        # Through PgBouncer in transaction mode, run right after the direct ones.
        Workload("drain_1proc_pgbouncer", "drain_pgbouncer",
                 ("--n", n(50_000), "--processes", "1"), "rate", "jobs/s",
                 jobqueue_only=True, named_only=True),
        Workload("enqueue_concurrent_pgbouncer", "enqueue_concurrent_pgbouncer",
                 ("--n", n(10_000), "--clients", "16"), "rate", "jobs/s",
                 jobqueue_only=True, named_only=True),
        # Every job with two tags and a meta object (issue 28's cost of tags and meta),
        # run right after the untagged ones in every round.
        Workload("enqueue_concurrent_tagged", "enqueue_concurrent_tagged",
                 ("--n", n(10_000), "--clients", "16"), "rate", "jobs/s",
                 jobqueue_only=True, named_only=True),
        Workload("drain_1proc_tagged", "drain_tagged", ("--n", n(50_000), "--processes", "1"),
                 "rate", "jobs/s", jobqueue_only=True, named_only=True),
        Workload("drain_2proc", "drain", ("--n", n(50_000), "--processes", "2"), "rate", "jobs/s"),
        Workload("cpu_1proc", "drain", ("--n", n(20_000), "--processes", "1", "--cpu-ms", "1"),
                 "rate", "jobs/s"),
        Workload("cpu_2proc", "drain", ("--n", n(20_000), "--processes", "2", "--cpu-ms", "1"),
                 "rate", "jobs/s"),
        Workload("drain_1proc_1M_history", "drain",
                 ("--n", n(50_000), "--processes", "1", "--history", n(1_000_000)), "rate",
                 "jobs/s"),
        Workload("drain_mixed", "drain_mixed", ("--n", n(50_000), "--processes", "1"), "rate",
                 "jobs/s", jobqueue_only=True),
        # drain_1proc (a claim of 2 types) with the worker's claim of 50 types, and of
        # every type (no type filter), run right after it in every round.
        Workload("drain_50types", "drain_50types", ("--n", n(50_000), "--processes", "1"),
                 "rate", "jobs/s", jobqueue_only=True, named_only=True),
        Workload("drain_any_type", "drain_any_type", ("--n", n(50_000), "--processes", "1"),
                 "rate", "jobs/s", jobqueue_only=True, named_only=True),
        Workload("latency", "latency", ("--n", "200", "--interval-ms", "20"), "p50_ms", "ms"),
        # enqueue -> handler -> its result seen by jq.wait, 200 jobs 20 ms apart.
        Workload("result_roundtrip", "result_roundtrip", ("--n", "200", "--interval-ms", "20"),
                 "p50_ms", "ms", jobqueue_only=True),
        # The same trip in jobqueue's table with nothing but its statements: the floor.
        Workload("result_roundtrip_floor", "result_roundtrip_floor",
                 ("--n", "200", "--interval-ms", "20"), "p50_ms", "ms", jobqueue_only=True),
        # 200 jobs/s offered while another session holds the xmin back for 120 s.
        Workload("pressure", "pressure",
                 ("--rate", "200", "--before", str(30 * scale), "--hold", str(120 * scale),
                  "--after", str(60 * scale)), "hold_throughput_ratio", "x",
                 jobqueue_only=True, named_only=True),
        # Workflows (bench/workflows.py): one parent, 10,000 children and a callback; a
        # chain of 1,000; the cost of a completion that releases children, by size.
        Workload("workflow_fanout", "drain_workflow_fanout",
                 ("--n", n(10_002), "--processes", "1"), "rate", "jobs/s",
                 jobqueue_only=True, named_only=True),
        Workload("workflow_chain", "drain_workflow_chain", ("--n", n(1_000), "--processes", "1"),
                 "rate", "jobs/s", jobqueue_only=True, named_only=True),
        Workload("workflow_release", "workflow_release",
                 ("--sizes", ",".join(n(s) for s in (1_000, 10_000, 100_000)), "--rounds", "1"),
                 f"plain_{n(1_000)}_us_per_completion", "us", jobqueue_only=True,
                 named_only=True),
        # Memory at the same setting for every system: 100 jobs at a time.
        Workload("worker_rss_mib", "drain",
                 ("--n", n(20_000), "--processes", "1", "--concurrency", "100"),
                 "worker_rss_mib", "MiB"),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jobqueue bench", description=__doc__.split("\n")[0])
    parser.add_argument("--compare", default="", help="peers, comma-separated: "
                        + ", ".join(PEERS))  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="a tenth of each workload")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--only", default="", help="workload keys, comma-separated")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)

    peers = [p for p in args.compare.split(",") if p]
    unknown = [p for p in peers if p not in PEERS]
    if unknown or args.runs < 1:
        parser.error(f"unknown peer {unknown[0]!r}" if unknown else "--runs must be >= 1")
    chosen = [w for w in workloads(0.1 if args.quick else 1.0)
              if w.key in args.only.split(",") or not (args.only or w.named_only)]  # fmt: skip

    dsn, server = database_url()
    try:
        systems = {"jobqueue": [sys.executable, str(HERE / "jobqueue_runner.py")]}
        for peer in peers:
            systems[peer] = [str(peer_python(peer)), str(HERE / "peers" / f"{peer}_runner.py")]
        dsns = {name: system_dsn(dsn, name) for name in systems}
        with contextlib.ExitStack() as stack:
            if any(w.key.endswith("_pgbouncer") for w in chosen):
                pgbouncer = runpy.run_path(str(HERE / "pgbouncer.py"))["pgbouncer"]
                pooled = stack.enter_context(pgbouncer(dsns["jobqueue"], free_port()))
                os.environ["JQBENCH_POOLER_DSN"] = pooled
            figures = {"machine": machine(dsn)} | measure(systems, dsns, chosen, args.runs)
        if "wakeup" in args.only.split(","):
            figures["systems"]["jobqueue"].update(wakeup_latency(dsns["jobqueue"], args.runs))
        if "limits" in args.only.split(","):  # only when named
            limits_figures = runpy.run_path(str(HERE / "limits.py"))["limits_figures"]
            figures["systems"]["jobqueue"].update(
                limits_figures(dsns["jobqueue"], args.runs, 0.1 if args.quick else 1.0)
            )
        if "connections" in args.only.split(","):  # minutes long: only when named
            figures["systems"]["jobqueue"].update(connection_budget(dsns["jobqueue"], args.runs))
        if "http_workers" in args.only.split(","):  # only when named: it builds Go code
            ours = figures["systems"]["jobqueue"]
            http_worker_figures = runpy.run_path(str(HERE / "http_workers.py"))
            ours.update(
                http_worker_figures["http_worker_figures"](
                    dsns["jobqueue"], args.runs, 0.1 if args.quick else 1.0
                )
            )
            if isinstance(ours.get("drain_1proc"), int | float):
                for suffix in ("", "_ts"):
                    ours[f"http_worker_drain{suffix}_ratio"] = round(
                        ours[f"http_worker_drain{suffix}"] / ours["drain_1proc"], 3
                    )
        if not args.only or "enqueue_http" in args.only.split(","):
            figures["systems"]["jobqueue"].update(
                enqueue_http(dsns["jobqueue"], args.runs, 0.1 if args.quick else 1)
            )
    finally:
        if server is not None:
            server.stop()
    print(json.dumps(figures, indent=2) if args.json else table(figures))
    return 0


# -- the database and the peers' environments -----------------------------------------------


def database_url() -> tuple[str, Any]:
    """DATABASE_URL, or the embedded server (in the bench cache, not the project's data)."""
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"], None
    from jobqueue.db.embedded import EmbeddedPostgres

    server = EmbeddedPostgres(CACHE / "embedded")
    return server.start(), server


def system_dsn(dsn: str, system: str) -> str:
    """A fresh database per system, so that no system measures another's tables.
    JQBENCH_DATABASE_PREFIX keeps two benches on one server out of each other's way."""
    name = f"{os.environ.get('JQBENCH_DATABASE_PREFIX', 'jqbench')}_{system}"

    async def create() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()

    asyncio.run(create())
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{name}"))


def peer_python(peer: str) -> Path:
    venv = CACHE / "venvs" / peer
    python = venv / "bin" / "python"
    stamp = venv / "installed.txt"
    wanted = "\n".join(PEERS[peer])
    if not stamp.exists() or stamp.read_text() != wanted:
        progress(f"installing {', '.join(PEERS[peer])} into {venv}")
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PEERS[peer]],
                       check=True)  # fmt: skip
        stamp.write_text(wanted)
    return python


def machine(dsn: str) -> dict[str, Any]:
    async def server_version() -> str:
        conn = await asyncpg.connect(dsn)
        try:
            return str(await conn.fetchval("SHOW server_version"))
        finally:
            await conn.close()

    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())  # fmt: skip
    memory_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(memory_kib / 2**20, 1),
        "python": platform.python_version(),
        "postgresql": asyncio.run(server_version()),
        "date": time.strftime("%Y-%m-%d"),
    }


# -- running the workloads --------------------------------------------------------------------


def measure(
    systems: dict[str, list[str]], dsns: dict[str, str], chosen: list[Workload], runs: int
) -> dict[str, Any]:
    """Run i of every workload, on every system, before run i + 1 of any starts, the
    systems in an order that rotates: a noisy minute on a shared machine then hits
    every system alike, and each workload alike, so that the ratios between workloads
    (drain_1proc_1M_history against drain_1proc) hold too."""
    for name, command in systems.items():
        run(command, "setup", dsns[name])
    figures: dict[str, dict[str, Any]] = {name: {} for name in systems}
    per_run: dict[str, dict[str, list[Any]]] = {name: {} for name in systems}
    names = {w.key: [n for n in systems if n == "jobqueue" or not w.jobqueue_only]
             for w in chosen}  # fmt: skip
    results: dict[str, dict[str, list[dict[str, Any]]]] = {
        w.key: {name: [] for name in names[w.key]} for w in chosen
    }
    for i in range(runs):
        for w in chosen:
            order = names[w.key][i % len(names[w.key]) :] + names[w.key][: i % len(names[w.key])]
            for name in order:
                progress(f"{name}: {w.key} run {i + 1}/{runs}")
                results[w.key][name].append(run(systems[name], w.command, dsns[name], *w.args))
    for w in chosen:
        for name, done in results[w.key].items():
            summarize(figures[name], w, done)
            per_run[name][w.key] = [r[w.result] for r in done]
    round_ratios(figures["jobqueue"], per_run["jobqueue"])
    return {"systems": figures, "runs": per_run}


# Figures that are one workload against another: (figure, workload, baseline).
ROUND_RATIOS = (
    ("drain_1proc_floor_ratio", "drain_1proc", "sql_floor"),
    ("enqueue_single_raw_ratio", "enqueue_single", "raw_insert"),
    ("enqueue_bulk_copy_ratio", "enqueue_bulk", "raw_copy"),
    ("drain_1proc_metrics_ratio", "drain_1proc_metrics", "drain_1proc"),
    ("drain_50types_ratio", "drain_50types", "drain_1proc"),
    ("drain_any_type_ratio", "drain_any_type", "drain_1proc"),
    ("drain_1proc_1M_history_ratio", "drain_1proc_1M_history", "drain_1proc"),
    ("drain_1proc_pgbouncer_ratio", "drain_1proc_pgbouncer", "drain_1proc"),
    ("enqueue_concurrent_pgbouncer_ratio", "enqueue_concurrent_pgbouncer", "enqueue_concurrent"),
    ("enqueue_concurrent_tagged_ratio", "enqueue_concurrent_tagged", "enqueue_concurrent"),
    ("drain_1proc_tagged_ratio", "drain_1proc_tagged", "drain_1proc"),
    ("workflow_fanout_ratio", "workflow_fanout", "drain_1proc"),
    ("workflow_chain_ratio", "workflow_chain", "drain_1proc"),
    # p50 against p50: above 1, the time jobqueue's code adds to the floor's trip.
    ("result_roundtrip_floor_ratio", "result_roundtrip", "result_roundtrip_floor"),
)


def round_ratios(figures: dict[str, Any], runs: dict[str, list[Any]]) -> None:
    """Each of ROUND_RATIOS measured, as the median of the rounds' ratios: each round
    runs the two one after the other, so a noisy minute hits both."""
    for figure, workload, baseline in ROUND_RATIOS:
        if workload in runs and baseline in runs:
            ratios = [w / b for w, b in zip(runs[workload], runs[baseline], strict=True)]
            figures[figure] = round(statistics.median(ratios), 3)


def summarize(figures: dict[str, Any], w: Workload, results: list[dict[str, Any]]) -> None:
    if w.key == "worker_rss_mib":
        figures[w.key] = max(r["worker_rss_mib"] for r in results)  # a peak, not a median
        return
    if w.command == "pressure":
        scalars = [k for k, v in results[0].items() if isinstance(v, int | float)]
        figures[w.key] = {k: median_of(results, k) for k in scalars}
        figures[f"{w.key}_tables"] = results[len(results) // 2]["tables"]
        return
    if w.command == "workflow_release":
        scalars = [k for k, v in results[0].items() if k.endswith("_us_per_completion")
                   or k.endswith("_us_per_child")]  # fmt: skip
        figures[w.key] = {k: median_of(results, k) for k in scalars}
        return
    if w.command in ("latency", "result_roundtrip", "result_roundtrip_floor"):
        figures[w.key] = {p: median_of(results, p) for p in ("p50_ms", "p95_ms", "p99_ms")}
    else:
        figures[w.key] = median_of(results, w.result)
    if "worker_cpu_us_per_job" in results[0]:
        figures[f"{w.key}_cpu_us_per_job"] = median_of(results, "worker_cpu_us_per_job")
    if w.command == "drain" and "concurrency" in results[0]:
        figures[f"{w.key}_concurrency"] = results[0]["concurrency"]
        figures["drain_rss_mib"] = max(
            figures.get("drain_rss_mib", 0), *(r["worker_rss_mib"] for r in results)
        )


def median_of(results: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(float(r[key]) for r in results), 2)


def run(command: list[str], *args: str) -> dict[str, Any]:
    name, dsn, rest = args[0], args[1], args[2:]
    done = subprocess.run(
        [*command, name, "--dsn", dsn, *rest], capture_output=True, text=True, check=False
    )
    lines = done.stdout.strip().splitlines()
    result: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    if done.returncode != 0 or "error" in result:
        raise SystemExit(
            f"jobqueue bench: {Path(command[-1]).name} {name} failed: "
            f"{result.get('error') or done.stderr.strip()[-2000:]}"
        )
    return result


def enqueue_http(dsn: str, runs: int, scale: float) -> dict[str, Any]:
    """`POST /jobs` from 16 concurrent clients against `jobqueue api`, and that server's
    CPU; each round once open (no token exists), once with a bearer token, and once
    against the floor (bench/http_floor.py: a bare Starlette app on the same server,
    storing the same row with the store's enqueue query)."""
    jobs, clients = max(16, int(10_000 * scale)), 16
    servers = {
        "enqueue_http": ["-m", "jobqueue", "api"],
        "enqueue_http_auth": ["-m", "jobqueue", "api"],
        "enqueue_http_floor": [str(HERE / "http_floor.py")],
    }
    rates: dict[str, list[float]] = {name: [] for name in servers}
    cpu_per_job: dict[str, list[float]] = {name: [] for name in servers}
    for i in range(runs):
        for name, server in servers.items():
            progress(f"jobqueue: {name} run {i + 1}/{runs}")
            port = free_port()
            env = {**os.environ, "DATABASE_URL": dsn, "PORT": str(port),
                   "JOBQUEUE_LOG_LEVEL": "warning", "WORKER_COUNT": str(clients)}  # fmt: skip
            api = subprocess.Popen([sys.executable, *server], env=env)
            try:
                wait_http(f"http://127.0.0.1:{port}/healthz", api)
                token = asyncio.run(bench_token(dsn, name == "enqueue_http_auth"))
                before = cpu_seconds(api.pid)
                seconds = asyncio.run(post_jobs(port, jobs, clients, token))
                cpu_per_job[name].append((cpu_seconds(api.pid) - before) / jobs * 1e6)
                rates[name].append(jobs / seconds)
            finally:
                api.terminate()
                api.wait(30)
    figures: dict[str, Any] = {}
    for name in servers:
        figures[name] = round(statistics.median(rates[name]), 2)
        figures[f"{name}_server_cpu_us_per_job"] = round(statistics.median(cpu_per_job[name]), 1)

    def ratio(name: str, base: str) -> float:  # per round, then the median
        return round(
            statistics.median(a / b for a, b in zip(rates[name], rates[base], strict=True)), 3
        )

    figures["enqueue_http_auth_ratio"] = ratio("enqueue_http_auth", "enqueue_http")
    figures["enqueue_http_floor_ratio"] = ratio("enqueue_http", "enqueue_http_floor")
    return figures


def wakeup_latency(dsn: str, runs: int) -> dict[str, Any]:
    """From a job's commit to its claim (its created_at to its started_at, both the
    database's clock), 200 jobs 20 ms apart, for `jobqueue worker` alone (its own
    LISTEN) and `--processes 2` (the supervisor's LISTEN, relayed), alternated."""
    p50s: dict[int, list[float]] = {1: [], 2: []}
    p99s: dict[int, list[float]] = {1: [], 2: []}
    for i in range(runs):
        for processes in (1, 2):
            progress(f"jobqueue: wakeup --processes {processes} run {i + 1}/{runs}")
            with demo_workers(dsn, processes):
                waits = asyncio.run(claim_waits(dsn, processes))
            p50s[processes].append(statistics.median(waits))
            p99s[processes].append(statistics.quantiles(waits, n=100)[98])
    return {
        f"wakeup_{n}proc_{q}_ms": round(statistics.median(values[n]), 3)
        for n in (1, 2)
        for q, values in (("p50", p50s), ("p99", p99s))
    }


@contextlib.contextmanager
def demo_workers(dsn: str, processes: int, **env: str) -> Iterator[None]:
    """`jobqueue worker --processes N` on the demo tasks, for as long as the block runs."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "jobqueue", "worker", "--processes", str(processes)],
        env={**os.environ, "DATABASE_URL": dsn, "JOBQUEUE_LOG_LEVEL": "warning",
             "JOBQUEUE_APP": "jobqueue.demo:jq", **env},
    )  # fmt: skip
    try:
        yield
    finally:
        worker.terminate()
        worker.wait(60)


async def workers_registered(conn: asyncpg.Connection, processes: int) -> None:
    """Until ``processes`` workers have registered (the schema may not exist yet)."""
    deadline = time.monotonic() + 60
    while True:
        with contextlib.suppress(asyncpg.UndefinedTableError):
            if await conn.fetchval("SELECT count(*) FROM jobqueue.workers") >= processes:
                return
        if time.monotonic() > deadline:
            raise SystemExit("jobqueue bench: the workers did not start")
        await asyncio.sleep(0.1)


async def claim_waits(dsn: str, processes: int) -> list[float]:
    conn = await asyncpg.connect(dsn)
    try:
        await workers_registered(conn, processes)
        await asyncio.sleep(2)  # every LISTEN in place
        await conn.execute("DELETE FROM jobqueue.jobs")
        for _ in range(200):
            await conn.execute("INSERT INTO jobqueue.jobs (type) VALUES ('noop')")
            await asyncio.sleep(0.02)
        unclaimed = "SELECT count(*) FROM jobqueue.jobs WHERE started_at IS NULL"
        deadline = time.monotonic() + 30
        while True:
            if not await conn.fetchval(unclaimed):
                break
            if time.monotonic() > deadline:
                raise SystemExit("jobqueue bench: jobs left unclaimed for 30 s")
            await asyncio.sleep(0.05)
        rows = await conn.fetch(
            "SELECT extract(epoch FROM started_at - created_at) * 1000 AS ms FROM jobqueue.jobs"
        )
        return [float(r["ms"]) for r in rows]
    finally:
        await conn.close()


def connection_budget(dsn: str, runs: int) -> dict[str, Any]:
    """Server connections held by `jobqueue worker --processes N` at WORKER_COUNT=100,
    N = 1, 4, 8: once started and idle, and the most seen while it drains 20,000 jobs
    per process (sampled every 50 ms). Then what one connection per process costs:
    `--processes 2` draining with JOBQUEUE_POOL_SIZE 1 (the default) and 4, alternated
    ``runs`` times, as a ratio of medians."""
    figures: dict[str, Any] = {}
    for processes in (1, 4, 8):
        progress(f"jobqueue: connections with --processes {processes}")
        with demo_workers(dsn, processes, WORKER_COUNT="100"):
            idle, busy, _ = asyncio.run(count_connections(dsn, processes))
        figures[f"connections_{processes}proc_idle"] = idle
        figures[f"connections_{processes}proc_busy"] = busy
    rates: dict[str, list[float]] = {"1": [], "4": []}
    for run in range(runs):
        for size, found in rates.items():
            progress(f"jobqueue: --processes 2 with a pool of {size}, run {run + 1}/{runs}")
            with demo_workers(dsn, 2, WORKER_COUNT="100", JOBQUEUE_POOL_SIZE=size):
                found.append(asyncio.run(count_connections(dsn, 2))[2])
    figures["drain_2proc_pool1"] = statistics.median(rates["1"])
    figures["drain_2proc_pool4"] = statistics.median(rates["4"])
    figures["drain_2proc_pool1_ratio"] = round(
        figures["drain_2proc_pool1"] / figures["drain_2proc_pool4"], 2
    )
    return figures


async def count_connections(dsn: str, processes: int) -> tuple[int, int, float]:
    """Connections once idle, the most while draining, and the drain's jobs/s."""
    conn = await asyncpg.connect(dsn)
    count = """SELECT count(*) FROM pg_stat_activity
               WHERE datname = current_database() AND pid <> pg_backend_pid()"""
    try:
        # Started: every process registered; then settled: a few heartbeats later.
        await workers_registered(conn, processes)
        await asyncio.sleep(5)
        idle: int = await conn.fetchval(count)
        await conn.execute(
            "INSERT INTO jobqueue.jobs (type) SELECT 'noop' FROM generate_series(1, $1)",
            20_000 * processes,
        )
        busy = idle
        started = time.monotonic()
        while await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM jobqueue.jobs WHERE status IN ('pending', 'running'))"
        ):
            busy = max(busy, await conn.fetchval(count))
            await asyncio.sleep(0.05)
        rate = 20_000 * processes / (time.monotonic() - started)
        await conn.execute("DELETE FROM jobqueue.jobs")
        return idle, busy, rate
    finally:
        await conn.close()


async def bench_token(dsn: str, auth: bool) -> str | None:
    """No token at all (the API is open on loopback), or one with `jobs:enqueue`."""
    from jobqueue.auth.tokens import new_token
    from jobqueue.db.store import Store

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute('DELETE FROM "jobqueue".api_tokens')
        if not auth:
            return None
        stored, secret = new_token(name="bench", scopes=["jobs:enqueue"])
        await Store(conn, "jobqueue").token_create(token=stored, expires_in_seconds=None)
        return secret
    finally:
        await conn.close()


async def post_jobs(port: int, jobs: int, clients: int, token: str | None) -> float:
    """16 keep-alive connections posting the same job, each waiting for its answer.

    A minimal HTTP/1.1 client: a general one (httpx) spends more CPU per request than
    the server does, and on two cores it would measure itself."""
    body = b'{"type": "noop", "payload": {}}'
    auth = b"" if token is None else b"Authorization: Bearer " + token.encode() + b"\r\n"
    request = (
        b"POST /jobs HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        + auth
        + b"Content-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )

    async def client(count: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for _ in range(count):
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                if not head.startswith(b"HTTP/1.1 201"):
                    raise SystemExit(f"jobqueue bench: POST /jobs answered {head[:40]!r}")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await reader.readexactly(length)
        finally:
            writer.close()

    started = time.monotonic()
    share = [jobs // clients + (1 if i < jobs % clients else 0) for i in range(clients)]
    await asyncio.gather(*(client(n) for n in share))
    return time.monotonic() - started


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen[bytes]) -> None:
    import httpx

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)
    raise SystemExit("jobqueue bench: `jobqueue api` did not start")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# -- the table -----------------------------------------------------------------------------------

LOWER_IS_BETTER = (
    "latency",
    "result_roundtrip",
    "worker_rss_mib",
    "drain_rss_mib",
    "enqueue_http_server_cpu",
    "enqueue_http_auth_server_cpu",
    "pressure_before_p",
    "pressure_hold_p",
)


def table(figures: dict[str, Any]) -> str:
    systems = {name: flat(f) for name, f in figures["systems"].items()}
    names = list(systems)
    keys = [k for k in dict.fromkeys(k for s in systems.values() for k in s)
            if not k.endswith("_concurrency")]  # fmt: skip
    header = ["figure", *names, *(f"jobqueue/{p}" for p in names[1:])]
    rows = [header]
    for key in keys:
        values = [systems[n].get(key) for n in names]
        if key.startswith(LOWER_IS_BETTER) or key.endswith("_cpu_us_per_job"):
            ratios = [ratio(v, values[0]) for v in values[1:]]
        else:
            ratios = [ratio(values[0], v) for v in values[1:]]
        rows.append([label(key), *(fmt(v) for v in values), *ratios])
    concurrency = {n: systems[n].get("drain_1proc_concurrency") for n in names}
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header))]
    lines = ["  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]  # fmt: skip
    m = figures["machine"]
    lines.append("")
    lines.append(f"machine: {m['cpus']} cpus ({m['cpu']}), {m['memory_gib']} GiB, "
                 f"PostgreSQL {m['postgresql']}, Python {m['python']}, {m['date']}")  # fmt: skip
    lines.append("drain concurrency: " + ", ".join(f"{n} {c}" for n, c in concurrency.items()))
    lines.append("worker_rss_mib: peak RSS of one worker process running 100 jobs at a time "
                 "(every system); drain_rss_mib: the peak over the drains above")  # fmt: skip
    lines.append("medians of runs; a ratio above 1 favours jobqueue (for latency, RSS and "
                 "CPU, lower is better, so those ratios are theirs/ours)")  # fmt: skip
    return "\n".join(lines)


def flat(figures: dict[str, Any]) -> dict[str, Any]:
    """{"latency": {"p50_ms": 1.2}} -> {"latency_p50_ms": 1.2}: one table row per number."""
    out: dict[str, Any] = {}
    for key, value in figures.items():
        if isinstance(value, dict):
            out.update({f"{key}_{k}": v for k, v in value.items() if not isinstance(v, dict)})
        else:
            out[key] = value
    return out


def label(key: str) -> str:
    units = ("_ms", "_mib", "_us_per_job", "_ratio", "_seconds")
    # A figure of the TypeScript worker ends in _ts after its unit.
    if key.endswith(units) or key.removesuffix("_ts").endswith(units):
        return key
    if key.startswith("connections_"):
        return f"{key} (server connections)"
    return f"{key} (jobs/s)"


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    if abs(value) < 10:  # ratios and milliseconds: 0.96 and 0.94 are not both "0.9"
        return f"{value:,.2f}"
    return f"{value:,.1f}" if abs(value) < 100 else f"{value:,.0f}"


def ratio(ours: Any, theirs: Any) -> str:
    if ours is None or theirs is None or not ours or not theirs:
        return "-"
    return f"{ours / theirs:.2f}x"


if __name__ == "__main__":
    sys.exit(main())
