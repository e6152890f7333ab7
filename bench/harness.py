"""Shared plumbing for the benchmark runner scripts, one script per queue system.

Standard library only, Python 3.11+: every runner runs under the virtualenv of its own system
and loads this file by path::

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import harness

A runner subclasses :class:`Adapter` with the library-specific part (schema, enqueue, history,
progress queries, the worker) and ends with ``harness.main(MyAdapter)``. The harness owns every
clock and every measurement, so all systems are timed by the same code. In outline (see
bench/peers/pgqueuer_runner.py for a whole one)::

    class MyAdapter(harness.Adapter):
        default_concurrency = 10

        async def open(self) -> None:
            self.connection = await asyncpg.connect(self.dsn)

        async def enqueue_one(self, seq: int | None) -> None: ...
        # ... the other hooks ...

        async def run_worker(self, concurrency, on_job, ready, stop) -> None:
            # start the library's worker whose handler calls on_job(seq) first; call ready()
            # once it listens; await stop.wait(); shut the worker down gracefully

    if __name__ == "__main__":
        harness.main(MyAdapter)

Protocol: ``PYTHON RUNNER COMMAND --dsn DSN [options]``. The last stdout line is one JSON
object; exit 0 on success, else exit 1 with ``{"error": "..."}``. Diagnostics go to stderr
(workers' stdout is sent there too). Commands and their output:

- ``setup``: drop and install the schema -> ``{"ok": true}``
- ``enqueue_single --n N``: empty, N single-enqueue calls -> ``{"jobs", "seconds", "rate"}``
- ``enqueue_concurrent --n N [--clients 16]``: the same calls from C coroutines at once,
  after :meth:`Adapter.open_concurrent` -> same, plus ``"clients"``
- ``enqueue_bulk --n N [--batch 1000]``: empty, bulk calls of B -> same, plus ``"note"``
  when the adapter sets :attr:`Adapter.bulk_note`
- ``drain --n N [--processes 1] [--concurrency C] [--cpu-ms X] [--history H]``: empty, H
  finished jobs, N pending ones, ANALYZE, then P worker processes ->
  ``{"jobs", "seconds", "rate", "processes", "concurrency", "worker_rss_mib",
  "first_start_spread_s"}`` (+ ``"note"`` on where the history went)
- ``latency [--n 200] [--interval-ms 20] [--concurrency C]`` ->
  ``{"p50_ms", "p95_ms", "p99_ms", "jobs", "worker_rss_mib", "concurrency", "percentiles"}``
- ``worker --marks PATH [--concurrency C] [--cpu-ms X]``: internal, started by the runner.

``--concurrency`` omitted means the system's own benchmark setting
(:attr:`Adapter.default_concurrency`); the output reports what was used.

Definitions, the same for every system:

- Every timed workload starts right after a ``CHECKPOINT``, so no system pays for the
  dirty pages another left behind.
- Enqueue timings cover only the library calls (``time.monotonic``), not emptying or checks.
- Drain: start is the earliest first-handler start across the workers, each written by the
  worker to its marks file with ``time.monotonic()`` (one clock for all processes on Linux), so
  interpreter start-up is excluded; end is when the runner, polling every 10 ms, sees no job
  pending or running. Afterwards the job counts must match (N finished, none left) or the run
  fails.
- Latency: ``handler start - time the enqueue call returned``, negatives kept (the worker may
  see the job before the client sees the commit ack); nearest-rank percentiles
  (:func:`percentile`).
- Worker RSS: the largest ``VmHWM`` in ``/proc/PID/status`` over the workers, read while they
  still run, right before SIGTERM (it is a high-water mark, so one late read is the peak).

What is here:

- :class:`Adapter`: the hooks a runner implements, documented on each method.
- :func:`main`: parse arguments, run the command, print the JSON line, exit.
- :func:`parse_args`, :func:`emit`: the argument parser and the result printer.
- :class:`Marks`: worker side, appends ``key monotonic`` lines (``ready``, ``first``, or a job's
  sequence number); :func:`read_marks` reads them back.
- :func:`job_hook`: what a worker's handler calls first (marks, then CPU burn);
  :func:`burn_cpu` busy-loops.
- :class:`WorkerPool`: spawns ``worker`` subprocesses of the running script, waits for their
  ready marks, reads their VmHWM, and always stops them (SIGTERM, SIGKILL after 10 s).
- :func:`wait_until`: polls a sync or async predicate; :func:`percentile`: nearest rank.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import inspect
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

POLL_INTERVAL_S = 0.01
STOP_GRACE_S = 10.0
READY_TIMEOUT_S = 60.0
# Enough for a listening worker's connection and notification path to settle after it is ready.
READY_SETTLE_S = 1.0
FILL_BATCH = 1000

JobHook = Callable[[int | None], None]


class Adapter:
    """One queue system. Subclass it; every hook is a coroutine run under ``asyncio.run``.

    Runner-side hooks (all commands except ``worker``) run between :meth:`open` and
    :meth:`close`. No-op jobs carry no payload; latency jobs carry their sequence number.
    """

    #: What ``--concurrency`` means when omitted; passed to :meth:`run_worker` as is.
    default_concurrency: int | None = None
    #: Put into ``enqueue_bulk``'s output, e.g. when the library lacks a bulk API.
    bulk_note: str | None = None

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    async def open(self) -> None:
        """Connect the runner side. Use autocommit: an idle open transaction would hold back
        vacuum and skew the measurement."""

    async def close(self) -> None:
        """Release what :meth:`open` took."""

    async def setup(self) -> None:
        """Drop whatever exists of the schema and install it from scratch."""
        raise NotImplementedError

    async def execute(self, statement: str) -> None:
        """Run one SQL statement on the runner's connection."""
        raise NotImplementedError

    async def empty(self) -> None:
        """Remove every job, pending or finished, and the system's history of them."""
        raise NotImplementedError

    async def enqueue_one(self, seq: int | None) -> None:
        """One call of the library's normal single-enqueue API, committed on return. ``seq``
        (latency only) must reach the handler's ``on_job``."""
        raise NotImplementedError

    async def enqueue_batch(self, count: int) -> None:
        """One call of the library's bulk-enqueue API for ``count`` no-op jobs."""
        raise NotImplementedError

    async def open_concurrent(self, clients: int) -> None:
        """Make :meth:`enqueue_one` safe for ``clients`` concurrent callers, as an application
        serving that many requests would set the library up (a pool, say). Default: nothing."""

    async def fill(self, count: int) -> None:
        """Make ``count`` pending no-op jobs before a drain; untimed."""
        for start in range(0, count, FILL_BATCH):
            await self.enqueue_batch(min(FILL_BATCH, count - start))

    async def add_history(self, count: int) -> str:
        """Insert ``count`` finished jobs where the system keeps them, the fastest way, and
        return a note saying where that is."""
        raise NotImplementedError

    async def analyze(self) -> None:
        await self.execute("ANALYZE")

    async def checkpoint(self) -> None:
        """Flush dirty pages before a timed workload: otherwise a checkpoint started by the
        previous workload's writes lands inside whichever system's run comes next."""
        await self.execute("CHECKPOINT")

    async def has_unfinished(self) -> bool:
        """Whether any job is pending or running; polled every 10 ms, so keep it cheap."""
        raise NotImplementedError

    async def counts(self) -> tuple[int, int]:
        """(unfinished, finished successfully) job counts, history included; for checks."""
        raise NotImplementedError

    def describe_concurrency(self, concurrency: int | None) -> int | str | None:
        """How the output reports the worker's concurrency setting."""
        return self.default_concurrency if concurrency is None else concurrency

    async def run_worker(
        self,
        concurrency: int | None,
        on_job: JobHook,
        ready: Callable[[], None],
        stop: asyncio.Event,
    ) -> None:
        """Run the system's worker until ``stop`` is set, then shut it down gracefully.

        The handler must call ``on_job(seq)`` first thing (``seq`` from the job's payload, or
        None). Call ``ready()`` once the worker is idle and listening for new jobs.
        """
        raise NotImplementedError


# --- arguments and output ---------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dsn", required=True)
    parser = argparse.ArgumentParser(description="Benchmark runner for one queue system.")
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser("setup", parents=[common])
    single = commands.add_parser("enqueue_single", parents=[common])
    single.add_argument("--n", type=int, required=True)
    concurrent = commands.add_parser("enqueue_concurrent", parents=[common])
    concurrent.add_argument("--n", type=int, required=True)
    concurrent.add_argument("--clients", type=int, default=16)
    bulk = commands.add_parser("enqueue_bulk", parents=[common])
    bulk.add_argument("--n", type=int, required=True)
    bulk.add_argument("--batch", type=int, default=1000)

    drain = commands.add_parser("drain", parents=[common])
    drain.add_argument("--n", type=int, required=True)
    drain.add_argument("--processes", type=int, default=1)
    drain.add_argument("--concurrency", type=int)
    drain.add_argument("--cpu-ms", type=float, default=0.0)
    drain.add_argument("--history", type=int, default=0)
    drain.add_argument("--timeout", type=float, default=1800.0, help="seconds")

    latency = commands.add_parser("latency", parents=[common])
    latency.add_argument("--n", type=int, default=200)
    latency.add_argument("--interval-ms", type=float, default=20.0)
    latency.add_argument("--concurrency", type=int)
    latency.add_argument("--timeout", type=float, default=120.0, help="seconds")

    worker = commands.add_parser("worker", parents=[common])
    worker.add_argument("--marks", required=True)
    worker.add_argument("--concurrency", type=int)
    worker.add_argument("--cpu-ms", type=float, default=0.0)
    worker.add_argument("--parent-pid", type=int)
    return parser.parse_args(argv)


def emit(result: dict[str, Any]) -> None:
    """Print the result as the one JSON line the orchestrator reads (the last stdout line)."""
    print(json.dumps(result), flush=True)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(adapter_class: Callable[[str], Adapter], argv: Sequence[str] | None = None) -> NoReturn:
    args = parse_args(argv)
    try:
        result = asyncio.run(_dispatch(adapter_class(args.dsn), args))
    except (asyncio.CancelledError, KeyboardInterrupt):
        emit({"error": "interrupted (SIGTERM or SIGINT); workers stopped"})
        sys.exit(1)
    except Exception as exc:
        traceback.print_exc()
        emit({"error": f"{type(exc).__name__}: {exc}"})
        sys.exit(1)
    emit(result)
    sys.exit(0)


async def _dispatch(adapter: Adapter, args: argparse.Namespace) -> dict[str, Any]:
    if args.command == "worker":
        return await _worker(adapter, args)
    # Cancelling lets the finally blocks stop the workers when the orchestrator gives up on us.
    main_task = asyncio.current_task()
    assert main_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    await adapter.open()
    try:
        command = _COMMANDS[args.command]
        return await command(adapter, args)
    finally:
        await adapter.close()


# --- commands ---------------------------------------------------------------------------


async def _setup(adapter: Adapter, args: argparse.Namespace) -> dict[str, Any]:
    await adapter.setup()
    return {"ok": True}


async def _enqueue_single(adapter: Adapter, args: argparse.Namespace) -> dict[str, Any]:
    await adapter.empty()
    await adapter.checkpoint()
    started = time.monotonic()
    for _ in range(args.n):
        await adapter.enqueue_one(None)
    seconds = time.monotonic() - started
    await _check_counts(adapter, unfinished=args.n, finished=0)
    return _throughput(args.n, seconds)


async def _enqueue_concurrent(adapter: Adapter, args: argparse.Namespace) -> dict[str, Any]:
    await adapter.empty()
    await adapter.open_concurrent(args.clients)
    await adapter.checkpoint()

    async def client(count: int) -> None:
        for _ in range(count):
            await adapter.enqueue_one(None)

    shares = [args.n // args.clients + (i < args.n % args.clients) for i in range(args.clients)]
    started = time.monotonic()
    await asyncio.gather(*(client(share) for share in shares))
    seconds = time.monotonic() - started
    await _check_counts(adapter, unfinished=args.n, finished=0)
    return _throughput(args.n, seconds) | {"clients": args.clients}


async def _enqueue_bulk(adapter: Adapter, args: argparse.Namespace) -> dict[str, Any]:
    await adapter.empty()
    await adapter.checkpoint()
    started = time.monotonic()
    for start in range(0, args.n, args.batch):
        await adapter.enqueue_batch(min(args.batch, args.n - start))
    seconds = time.monotonic() - started
    await _check_counts(adapter, unfinished=args.n, finished=0)
    result = _throughput(args.n, seconds)
    if adapter.bulk_note:
        result["note"] = adapter.bulk_note
    return result


async def _drain(adapter: Adapter, args: argparse.Namespace) -> dict[str, Any]:
    await adapter.empty()
    note = await adapter.add_history(args.history) if args.history > 0 else None
    await adapter.fill(args.n)
    await adapter.analyze()
    await _check_counts(adapter, unfinished=args.n, finished=args.history)
    await adapter.checkpoint()

    worker_args = _worker_args(args.dsn, args.concurrency, args.cpu_ms)
    with (
        tempfile.TemporaryDirectory(prefix="jqbench-") as tmp,
        WorkerPool(args.processes, worker_args, Path(tmp)) as pool,
    ):
        # CPU from readiness on: the drain's, without the start-up's imports.
        await pool.wait_ready(READY_TIMEOUT_S)
        cpu_ready = pool.cpu_seconds()
        ended = await wait_until(_negate(adapter.has_unfinished), timeout=args.timeout, pool=pool)
        cpu_drain = pool.cpu_seconds() - cpu_ready
        firsts = [marks.first for marks in pool.marks() if marks.first is not None]
    if not firsts:
        raise RuntimeError("no worker recorded a job start")
    await _check_counts(adapter, unfinished=0, finished=args.n + args.history)

    seconds = ended - min(firsts)
    result = _throughput(args.n, seconds)
    result |= {
        "processes": args.processes,
        "concurrency": adapter.describe_concurrency(args.concurrency),
        "worker_rss_mib": pool.peak_rss_mib(),
        # Worker CPU (user + system) per job, from the workers' readiness to the end.
        "worker_cpu_us_per_job": round(cpu_drain / args.n * 1e6, 2),
        # How far apart the workers began: start-up skew is inside the measured time.
        "first_start_spread_s": round(max(firsts) - min(firsts), 4),
    }
    if note:
        result["note"] = note
    return result


async def _latency(adapter: Adapter, args: argparse.Namespace) -> dict[str, Any]:
    await adapter.empty()
    await adapter.checkpoint()
    interval = args.interval_ms / 1000.0
    commits: list[float] = []
    worker_args = _worker_args(args.dsn, args.concurrency, 0.0)
    with (
        tempfile.TemporaryDirectory(prefix="jqbench-") as tmp,
        WorkerPool(1, worker_args, Path(tmp)) as pool,
    ):
        await pool.wait_ready(READY_TIMEOUT_S)
        await asyncio.sleep(READY_SETTLE_S)
        # A fixed schedule, so a slow enqueue does not shift every later job.
        schedule = time.monotonic()
        for seq in range(args.n):
            delay = schedule + seq * interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await adapter.enqueue_one(seq)
            commits.append(time.monotonic())

        expected: int = args.n

        def all_started() -> bool:
            return len(pool.marks()[0].jobs) >= expected

        await wait_until(all_started, timeout=args.timeout, pool=pool)
        starts = pool.marks()[0].jobs
    missing = [seq for seq in range(args.n) if seq not in starts]
    if missing:
        raise RuntimeError(f"jobs never started: {missing[:10]}")
    latencies = [(starts[seq] - commits[seq]) * 1000.0 for seq in range(args.n)]
    return {
        **spread(latencies),
        "jobs": args.n,
        "worker_rss_mib": pool.peak_rss_mib(),
        "concurrency": adapter.describe_concurrency(args.concurrency),
        "percentiles": "nearest-rank",
    }


async def _worker(adapter: Adapter, args: argparse.Namespace) -> dict[str, Any]:
    _die_with_parent(args.parent_pid)
    marks = Marks(args.marks)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await adapter.run_worker(args.concurrency, job_hook(marks, args.cpu_ms), marks.ready, stop)
    finally:
        marks.close()
    return {"ok": True}


_COMMANDS: dict[str, Callable[[Adapter, argparse.Namespace], Awaitable[dict[str, Any]]]] = {
    "setup": _setup,
    "enqueue_single": _enqueue_single,
    "enqueue_concurrent": _enqueue_concurrent,
    "enqueue_bulk": _enqueue_bulk,
    "drain": _drain,
    "latency": _latency,
}


def _throughput(jobs: int, seconds: float) -> dict[str, Any]:
    return {"jobs": jobs, "seconds": round(seconds, 4), "rate": round(jobs / seconds, 1)}


async def _check_counts(adapter: Adapter, *, unfinished: int, finished: int) -> None:
    # A figure over the wrong number of jobs is worse than no figure.
    got = await adapter.counts()
    if got != (unfinished, finished):
        raise RuntimeError(
            f"expected {unfinished} unfinished and {finished} finished jobs, found {got}"
        )


def _negate(check: Callable[[], Awaitable[bool]]) -> Callable[[], Awaitable[bool]]:
    async def negated() -> bool:
        return not await check()

    return negated


def _worker_args(dsn: str, concurrency: int | None, cpu_ms: float) -> list[str]:
    args = ["--dsn", dsn, "--cpu-ms", str(cpu_ms), "--parent-pid", str(os.getpid())]
    if concurrency is not None:
        args += ["--concurrency", str(concurrency)]
    return args


def _die_with_parent(parent_pid: int | None) -> None:
    # A runner killed with SIGKILL cannot stop its workers; the kernel does it for us.
    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if parent_pid is not None and os.getppid() != parent_pid:
        raise RuntimeError("the runner that started this worker is gone")


# --- worker side: marks and the handler ---------------------------------------------------


class Marks:
    """Appends ``key monotonic`` lines to a worker's marks file, one write(2) each, unbuffered,
    so the runner sees them at once."""

    def __init__(self, path: str | Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._first_written = False

    def write(self, key: str, at: float) -> None:
        os.write(self._fd, f"{key} {at!r}\n".encode())

    def ready(self) -> None:
        self.write("ready", time.monotonic())

    def job_started(self, seq: int | None) -> None:
        at = time.monotonic()
        if not self._first_written:
            self._first_written = True
            self.write("first", at)
        if seq is not None:
            self.write(str(seq), at)

    def close(self) -> None:
        os.close(self._fd)


@dataclass
class MarksData:
    ready: float | None = None
    first: float | None = None
    jobs: dict[int, float] = field(default_factory=dict)


def read_marks(path: str | Path) -> MarksData:
    data = MarksData()
    with contextlib.suppress(FileNotFoundError), open(path) as lines:
        for line in lines:
            key, _, at = line.partition(" ")
            if not line.endswith("\n"):
                break  # still being written
            if key == "ready":
                data.ready = float(at)
            elif key == "first":
                data.first = float(at)
            else:
                data.jobs[int(key)] = float(at)
    return data


def burn_cpu(ms: float) -> None:
    """Busy-loop for ``ms`` milliseconds of wall time: pure-Python CPU work holding the GIL."""
    until = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < until:
        pass


def job_hook(marks: Marks, cpu_ms: float) -> JobHook:
    """The handler body every system's worker runs: mark the start, then burn ``cpu_ms``."""

    def on_job(seq: int | None) -> None:
        marks.job_started(seq)
        if cpu_ms > 0:
            burn_cpu(cpu_ms)

    return on_job


# --- runner side: worker processes, polling, statistics --------------------------------------


class WorkerPool:
    """``count`` processes running this same script's ``worker`` command, each with its own
    marks file in ``directory``. Use it as a context manager: leaving stops every worker."""

    def __init__(self, count: int, worker_args: list[str], directory: Path) -> None:
        self._command = [sys.executable, str(Path(sys.argv[0]).resolve()), "worker", *worker_args]
        self._mark_paths = [directory / f"worker-{index}.marks" for index in range(count)]
        self._processes: list[subprocess.Popen[bytes]] = []
        self._peak_kib: dict[int, int] = {}

    def __enter__(self) -> WorkerPool:
        try:
            for path in self._mark_paths:
                self._processes.append(
                    subprocess.Popen(
                        [*self._command, "--marks", str(path)],
                        stdin=subprocess.DEVNULL,
                        stdout=sys.stderr.fileno(),
                    )
                )
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def marks(self) -> list[MarksData]:
        return [read_marks(path) for path in self._mark_paths]

    def check_alive(self) -> None:
        for process in self._processes:
            if process.poll() is not None:
                raise RuntimeError(f"worker {process.pid} exited early with {process.returncode}")

    async def wait_ready(self, timeout: float) -> None:
        def all_ready() -> bool:
            return all(marks.ready is not None for marks in self.marks())

        await wait_until(all_ready, timeout=timeout, pool=self)

    def sample_rss(self) -> None:
        for process in self._processes:
            if process.poll() is None:
                kib = _vm_hwm_kib(process.pid)
                if kib is not None:
                    self._peak_kib[process.pid] = max(kib, self._peak_kib.get(process.pid, 0))

    def cpu_seconds(self) -> float:
        """User and system CPU the live workers have used so far."""
        total = 0
        for process in self._processes:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def peak_rss_mib(self) -> float | None:
        if not self._peak_kib:
            return None
        return round(max(self._peak_kib.values()) / 1024.0, 1)

    def stop(self) -> None:
        """SIGTERM every worker, SIGKILL those still alive after 10 s; reap them all."""
        self.sample_rss()
        for process in self._processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for process in self._processes:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"worker {process.pid} ignored SIGTERM for {STOP_GRACE_S} s, killing it")
                process.kill()
                process.wait()
            if process.returncode not in (0, -signal.SIGTERM):
                log(f"worker {process.pid} exited with {process.returncode}")


def _vm_hwm_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return None


async def wait_until(
    check: Callable[[], bool | Awaitable[bool]],
    *,
    timeout: float,
    interval: float = POLL_INTERVAL_S,
    pool: WorkerPool | None = None,
) -> float:
    """Call ``check`` (sync or async) every ``interval`` until it is true; return the
    ``time.monotonic()`` at which it was seen true. Fails if a worker of ``pool`` dies."""
    deadline = time.monotonic() + timeout
    while True:
        outcome = check()
        done = await outcome if inspect.isawaitable(outcome) else outcome
        now = time.monotonic()
        if done:
            return now
        if pool is not None:
            pool.check_alive()
        if now > deadline:
            raise TimeoutError(f"not done after {timeout} s")
        await asyncio.sleep(interval)


def spread(times_ms: Sequence[float]) -> dict[str, float]:
    """p50, p95 and p99 of times in ms, as the latency figures report them."""
    return {f"p{pct}_ms": round(percentile(times_ms, pct), 3) for pct in (50, 95, 99)}


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile: the smallest value with at least ``pct`` % of values <= it."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[rank - 1]
