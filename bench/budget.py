"""`python bench/budget.py`: what the hot paths cost, counted, and held to bench/budget.json.

On a shared machine a timing moves by ±15% from run to run, so no budget can be a
time. What a job costs can be counted instead, and counts repeat. For each workload
below, per job:

- ``statements``: statements the server ran in the workload's database
  (pg_stat_statements ``calls``, BEGIN and COMMIT included);
- ``plans``: times the planner ran for them (``plans``, with track_planning on);
- ``buffers``: shared buffers they touched, planning included (``shared_blks_hit``
  + ``shared_blks_read``);
- ``wal_records``: WAL records they wrote: every row, index entry and counter row;
- ``round_trips``: messages the measured process sent that wait for the server's
  answer (Sync, Query, and Flush, which asyncpg's prepares end with), counted by a
  proxy between it and the server: with the prepares, which pg_stat_statements does
  not see;
- ``instructions``: instructions the worker (or API) process executed, under
  ``valgrind --tool=callgrind``.

Workloads (sizes in WORKLOADS): enqueue one at a time, from 16 coroutines, in bulk,
and over HTTP (``jobqueue api``); a drain of pending no-op jobs by the real Worker,
as bench/jobqueue_runner.py runs it; single jobs into an idle worker (the latency
path: a claim and a completion each); a job that fails once and is retried; and
workflows whose parents' completions release their children. Each workload runs
once to warm up (connections opened, statements prepared, code paths taken once),
then once measured, between two quiet points (nothing running on the database).

The database counts come from a run at native speed, the instructions from a second
run with the worker and the API under callgrind, instrumented only once they are
ready (start-up is not counted): about 50 times slower, so their claims and
completions batch differently, but the same way each time. To make that repeatable,
nothing runs on a timer during the measurements (the poll, heartbeat, leader,
schedules and listener ping intervals are an hour long) and the hash seed is fixed.

What the bench itself runs on the database (its reads of the statistics, the INSERT
that hands the idle worker its next job, filling a queue) is left out. The drains
and workflows start with the resume of their paused queue: that one statement is
counted with them.

    python bench/budget.py                  # measure, compare, exit 1 if over budget
    python bench/budget.py --record         # write the figures as the new budgets
    python bench/budget.py --calibrate 10   # ten runs: budgets and tolerances
    python bench/budget.py --only drain,latency --skip-instructions

Runs on DATABASE_URL (whose server must preload pg_stat_statements), or by default
on an embedded server of its own, started with it. The committed budgets were
recorded on the embedded server: see docs/budget.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
# The checkout's own code, also in the processes started here, even where the
# virtualenv's editable install points at another checkout.
SRC = HERE.parent / "src"
sys.path.insert(0, str(SRC))
sys.path.insert(0, str(HERE))

import asyncpg  # noqa: E402
from run import free_port, post_jobs  # noqa: E402

from jobqueue import JobContext, logs  # noqa: E402
from jobqueue.app import JobQueue  # noqa: E402
from jobqueue.config import Settings  # noqa: E402
from jobqueue.db.embedded import EmbeddedPostgres  # noqa: E402
from jobqueue.db.migrate import migrate  # noqa: E402
from jobqueue.db.sql import Queries, done_channel_name, queries  # noqa: E402
from jobqueue.db.store import Store  # noqa: E402
from jobqueue.workflows import step  # noqa: E402

BUDGET_FILE = HERE / "budget.json"
SCRIPT = Path(__file__).resolve()
SCHEMA = "jobqueue"
QUEUE = "default"
# In every statement the bench runs itself, after its first word (pg_stat_statements
# keeps no comment before it), to leave it out of the counts.
MARK = "/* budget */"
# Long enough that nothing runs on a timer while a workload is measured.
QUIET_SECONDS = 3600.0
RETRY_DELAY = 0.3  # the retried job's wait: the failure is written long before it ends
CHILDREN = 10  # per workflow
HTTP_QUEUE = "http"  # a queue the budget's Python worker does not serve
HTTP_BATCH = 50  # jobs per claim over HTTP, as bench/http_workers.py's workers take them
# Times a workload is measured while a pool opens a connection during it, or one of its
# connections runs a statement with an array type it has not seen: a pool of the worker
# or the API opens its second and later connections when two of its tasks first want
# one at once, and which connection first runs a statement is timing's choice too; the
# new connection's prepares and asyncpg's look-up of the types (two statements, WITH
# RECURSIVE typeinfo_tree and its jit setting) are then counted as the workload's (CI
# gave workflow.statements 0.0318 per job against 0.0227 once, and retry.statements
# 4.2 against 4 another time, under a busy machine).
MEASURES = 3
# Round trips a workload may spend beyond its budget on prepares (see TOLERANCE_RULE).
PREPARES = 3
# Buffers and WAL records a run may spend beyond its budget as the counters' changes go
# from one partition to the other (migration 0025: turns of five seconds, so a run
# crosses none, one or two as timing has it). Each crossing cost 10 buffers and 1 WAL
# record over a run of 500 enqueues (CI gave 6.046 and 4.048 per job against 6.026
# and 4.046); two crossings, doubled again for a connection more.
TURN_BUFFERS = 40
TURN_WAL_RECORDS = 4
SERVER_SETTINGS = {
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track_planning": "on",
}
# Hash randomisation changes the order of sets and dicts, and with it the instructions.
HASH_SEED = "0"


class CannotMeasure(Exception):
    """Nothing could be measured: exit 2, apart from 1 (over budget)."""


# -- the workloads --------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    key: str
    process: str  # whose instructions are counted: "worker", "api", or "" (none)
    what: str  # for budget.json, "{n}" the jobs measured
    warmup: int
    jobs: int  # measured, at native speed
    jobs_valgrind: int = 0  # measured under callgrind (0: no instructions counted)
    batched: bool = False  # its jobs share statements, as timing has it


WORKLOADS = (
    Workload("enqueue_single", "", "{n} jq.enqueue() calls, one after another", 50, 500),
    Workload("enqueue_concurrent", "", "{n} jq.enqueue() calls from 16 coroutines at once "
             "(concurrent calls share INSERTs)", 320, 2000, batched=True),
    Workload("enqueue_bulk", "", "{n} jobs by jq.enqueue_many() calls of 1,000", 1000, 5000),
    Workload("enqueue_http", "api", "{n} POST /jobs to `jobqueue api`, one after another on "
             "one keep-alive connection", 50, 500, 200),
    Workload("http_work", "api", "{n} no-op jobs worked over HTTP through `jobqueue api` "
             f"(docs/http-workers.md): POST /claims of up to {HTTP_BATCH}, each carrying the "
             "outcomes of the jobs the claim before it handed out, as the clients' workers "
             "send them", 10 * HTTP_BATCH, 1000, 500),
    Workload("drain", "worker", "{n} no-op jobs, pending in a paused queue, drained from its "
             "resume by the Worker as bench/jobqueue_runner.py runs it (WORKER_COUNT 1000, "
             "claims of up to 500)", 500, 2000, 1000, batched=True),
    # A warm-up of 25: the claim and the completion may each run on either of the
    # worker's two pooled connections (the completer takes the other one while the
    # producer still holds the first), and PostgreSQL plans a statement afresh for its
    # first five runs on each connection. Five jobs left some of those in the measured
    # window once (latency.plans 0.14 instead of 0.04, buffers 34.2 instead of 29.6).
    Workload("latency", "worker", "{n} no-op jobs handed one at a time to an idle worker, "
             "each once the one before has ended: a claim and a completion per job", 25, 50,
             50),
    Workload("retry", "worker", "{n} jobs handed one at a time to an idle worker, whose "
             f"handler fails the first attempt and succeeds the second ({RETRY_DELAY:g} s "
             "later)", 2, 10, 10),
    Workload("workflow", "worker", "{n} jobs of workflows of a parent and "
             f"{CHILDREN} children, pending in a paused queue, from its resume: each "
             "parent's completion releases its children", 2 * (CHILDREN + 1),
             20 * (CHILDREN + 1), 10 * (CHILDREN + 1), batched=True),
)  # fmt: skip

METRICS = {
    "statements": ("statements/job", "statements the server ran in the workload's database "
                   "(pg_stat_statements calls, BEGIN and COMMIT included)"),
    "round_trips": ("round trips/job", "messages sent by the measured process that wait for "
                    "the server's answer (Sync, Query, Flush), prepares included, counted by a "
                    "proxy between it and the server"),
    "plans": ("plans/job", "times the planner ran for those statements "
              "(pg_stat_statements plans, track_planning on)"),
    "buffers": ("buffers/job", "shared buffers those statements touched, planning included "
                "(pg_stat_statements shared_blks_hit + shared_blks_read)"),
    "wal_records": ("WAL records/job", "WAL records those statements wrote: every row, index "
                    "entry and counter row (pg_stat_statements wal_records)"),
    "instructions": ("instructions/job", "instructions the {process} process executed "
                     "(valgrind --tool=callgrind), instrumented once it was ready"),
}  # fmt: skip


# -- what a workload is measured with ---------------------------------------------------------


class Meter(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> dict[str, float]: ...


class Session:
    """One database for a run, the proxy in front of it, and the bench's own view of it:
    a connection that reads the statistics (its statements marked) and hears the jobs
    that end, and a JobQueue that fills queues and pauses them."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.proxy = Proxy(dsn)
        self.proxy_dsn = ""
        self.announced = 0  # jobs that ended, by the done channel
        self._announced = asyncio.Event()
        self.slow = False  # a process under callgrind: settle on a longer quiet
        self.api_port = 0

    async def open(self) -> None:
        self.proxy_dsn = await self.proxy.start()
        self.conn: asyncpg.Connection = await asyncpg.connect(self.dsn)
        await self.conn.add_listener(done_channel_name(SCHEMA), self._ended)
        self.store = Store(self.conn, SCHEMA)
        tracked = await self.conn.fetchval("SHOW pg_stat_statements.track_planning")
        self.track_planning = tracked == "on"
        settings = Settings(database_url=self.dsn, schema=SCHEMA, log_level="warning")
        self.helper = JobQueue(settings=settings)  # fills and pauses, not measured
        subject = dataclasses.replace(settings, database_url=self.proxy_dsn)
        self.subject = JobQueue(settings=subject)  # the enqueues measured

    async def close(self) -> None:
        """What open() opened, even if it did not get to the end."""
        for jq in (getattr(self, "subject", None), getattr(self, "helper", None)):
            if jq is not None:
                await jq.close()
        if hasattr(self, "conn"):
            await self.conn.close()
        await self.proxy.stop()

    def _ended(self, conn: object, pid: int, channel: str, payload: str) -> None:
        self.announced += payload.count(",") + 1
        self._announced.set()

    async def ended(self, target: int, timeout: float) -> None:
        """Until ``target`` jobs have ended since the session began."""
        deadline = time.monotonic() + timeout
        while self.announced < target:
            self._announced.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{target - self.announced} jobs had not ended in {timeout:g} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._announced.wait(), left)

    async def statements(self) -> list[asyncpg.Record]:
        return await self.conn.fetch(
            f"""SELECT {MARK} query, calls, plans, shared_blks_hit + shared_blks_read AS buffers,
                       wal_records
                FROM pg_stat_statements
                WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                  AND query NOT LIKE '%{MARK}%'"""
        )

    async def reset_statements(self) -> None:
        await self.conn.execute(
            f"""SELECT {MARK} pg_stat_statements_reset(0, (SELECT oid FROM pg_database
                WHERE datname = current_database()), 0)"""
        )

    async def settle(self) -> None:
        """Until nothing has run on the database for a while: the workload's last
        statements (a claim that finds nothing, after the last completion) are in."""
        interval = 0.25 if self.slow else 0.05
        last, same = None, 0
        while same < 3:
            rows = await self.statements()
            now = (sum(r["calls"] for r in rows), self.proxy.total())
            same = same + 1 if now == last else 0
            last = now
            await asyncio.sleep(interval)

    @contextlib.asynccontextmanager
    async def measured(self, meter: Meter | None, figures: dict[str, float]) -> AsyncIterator[None]:
        """The block's costs, into ``figures`` (totals), if there is a meter."""
        await self.settle()
        if meter is not None:
            await meter.start()
        yield
        await self.settle()
        if meter is not None:
            figures.update(await meter.stop())

    async def empty(self) -> None:
        await self.conn.execute(
            f'TRUNCATE {MARK} "{SCHEMA}".jobs, "{SCHEMA}".workflows, "{SCHEMA}".workflow_edges '
            "RESTART IDENTITY CASCADE"
        )

    async def analyze(self) -> None:
        await self.conn.execute(f"ANALYZE {MARK}")

    async def pause(self) -> None:
        await self.store.queue_pause(name=QUEUE)

    async def resume(self) -> None:
        """On the bench's one connection, where the warm-up prepared it: a pooled one
        might prepare it again, and look up the types of its columns."""
        await self.store.queue_resume(name=QUEUE)

    async def hand_over(self, type: str) -> None:
        """One job, by an INSERT of the bench's own (not counted), as an application's
        would be: its trigger wakes the worker."""
        await self.conn.execute(f'INSERT {MARK} INTO "{SCHEMA}".jobs (type) VALUES ($1)', type)


class DatabaseMeter:
    """pg_stat_statements and the proxy's counts, from start to stop."""

    def __init__(self, session: Session) -> None:
        self.session = session
        # (calls, statement, plans, buffers) of the last stop, by statement
        self.breakdown: list[tuple[int, str, int, int]] = []

    async def start(self) -> None:
        await self.session.reset_statements()
        self.session.proxy.counts.clear()

    async def stop(self) -> dict[str, float]:
        rows = await self.session.statements()
        self.breakdown = sorted(
            ((r["calls"], statement_name(r["query"]), r["plans"], r["buffers"]) for r in rows),
            reverse=True,
        )
        counts = self.session.proxy.counts
        found = {
            "statements": sum(r["calls"] for r in rows),
            "round_trips": counts[b"S"] + counts[b"Q"] + counts[b"H"],
            "plans": sum(r["plans"] for r in rows),
            "buffers": sum(r["buffers"] for r in rows),
            "wal_records": sum(r["wal_records"] for r in rows),
        }
        if not self.session.track_planning:
            del found["plans"]  # not counted at all, rather than counted as none
        return found


def words(sql: str) -> tuple[str, ...]:
    """A statement's words, without its comments and constants: the same for a .sql
    file and its text in pg_stat_statements, which turns constants (NULL too) into $n."""
    sql = re.sub(r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'", " ", sql, flags=re.DOTALL)
    found = (w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z_0-9]*", sql))
    return tuple(w for w in found if w not in ("null", "true", "false"))


STATEMENTS = {
    words(getattr(queries(SCHEMA), f.name)): f"{f.name}.sql"
    for f in dataclasses.fields(Queries)
    if f.name != "schema"
}


def statement_name(query: str) -> str:
    """The .sql file a statement comes from, else its first words."""
    return STATEMENTS.get(words(query)) or " ".join(query.split())[:60]


class CallgrindMeter:
    """Instructions executed by one process under callgrind, from start to stop."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._at = 0

    async def start(self) -> None:
        self._at = await callgrind_instructions(self.pid)

    async def stop(self) -> dict[str, float]:
        return {"instructions": await callgrind_instructions(self.pid) - self._at}


async def callgrind_control(*args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        "callgrind_control", *args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), 60)
    except TimeoutError:
        process.kill()
        await process.wait()
        # vgdb wakes a process that waits in a system call through ptrace.
        raise RuntimeError(
            f"callgrind_control {' '.join(args)} had no answer in 60 s: may this user "
            "ptrace its own processes?"
        ) from None
    if process.returncode != 0:
        raise RuntimeError(f"callgrind_control {' '.join(args)}: {out.decode().strip()}")
    return out.decode()


async def callgrind_instructions(pid: int) -> int:
    """The process's instructions since instrumentation began, every thread's."""
    out = await callgrind_control("-e", str(pid))
    counts = re.findall(r"^\s*Th\s*\d+\s+([\d,]+)", out, re.MULTILINE)
    if not counts:
        raise RuntimeError(f"no instruction count from callgrind_control: {out.strip()}")
    return sum(int(c.replace(",", "")) for c in counts)


# -- the workloads' bodies ------------------------------------------------------------------


async def enqueue_single(s: Session, n: int, meter: Meter | None, out: dict[str, float]) -> int:
    await s.empty()
    async with s.measured(meter, out):
        for _ in range(n):
            await s.subject.enqueue("noop", {})
    return n


async def enqueue_concurrent(s: Session, n: int, meter: Meter | None, out: dict[str, float]) -> int:
    await s.empty()

    async def client(count: int) -> None:
        for _ in range(count):
            await s.subject.enqueue("noop", {})

    async with s.measured(meter, out):
        await asyncio.gather(*(client(n // 16 + (i < n % 16)) for i in range(16)))
    return n


async def enqueue_bulk(s: Session, n: int, meter: Meter | None, out: dict[str, float]) -> int:
    await s.empty()
    async with s.measured(meter, out):
        for _ in range(n // 1000):
            await s.subject.enqueue_many("noop", [{}] * 1000)
    return n // 1000 * 1000


async def enqueue_http(s: Session, n: int, meter: Meter | None, out: dict[str, float]) -> int:
    await s.empty()
    async with s.measured(meter, out):
        await post_jobs(s.api_port, n, 1, None)
    return n


async def http_work(s: Session, n: int, meter: Meter | None, out: dict[str, float]) -> int:
    await s.empty()
    for start in range(0, n, 1000):
        await s.helper.enqueue_many("noop", [{}] * min(1000, n - start), queue=HTTP_QUEUE)
    await s.analyze()
    async with s.measured(meter, out):
        await work_over_http(s.api_port, n)
    return n


async def work_over_http(port: int, jobs: int) -> None:
    """A worker over HTTP at its leanest: each claim carries the previous one's jobs'
    outcomes (completed, no result), until a claim finds none left."""
    import httpx

    claim: dict[str, Any] = {"worker": "budget", "queues": [HTTP_QUEUE], "types": ["noop"],
                             "max": HTTP_BATCH, "wait_seconds": 0}  # fmt: skip
    done = 0
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
        outcomes: list[dict[str, Any]] = []
        while True:
            answer = await client.post("/claims", json={**claim, "outcomes": outcomes})
            if answer.status_code != 200:
                raise RuntimeError(f"POST /claims answered {answer.status_code}: {answer.text}")
            body = answer.json()
            done += sum(1 for o in body["outcomes"] if o["ok"])
            outcomes = [{"lease": job["lease"]} for job in body["jobs"]]
            if not outcomes:
                break
    if done != jobs:
        raise RuntimeError(f"http_work: {done} of {jobs} jobs completed")


async def drain(s: Session, n: int, meter: Meter | None, out: dict[str, float]) -> int:
    await s.empty()
    await s.pause()
    for start in range(0, n, 1000):
        await s.helper.enqueue_many("noop", [{}] * min(1000, n - start))
    await s.analyze()  # as the runner does before a drain
    target = s.announced + n
    async with s.measured(meter, out):
        await s.resume()
        await s.ended(target, timeout(s, n))
    return n


async def one_at_a_time(
    s: Session, n: int, meter: Meter | None, out: dict[str, float], type: str
) -> int:
    await s.empty()
    async with s.measured(meter, out):
        for _ in range(n):
            target = s.announced + 1
            await s.hand_over(type)
            await s.ended(target, timeout(s, 1) + RETRY_DELAY)
    return n


async def latency(s: Session, n: int, meter: Meter | None, out: dict[str, float]) -> int:
    return await one_at_a_time(s, n, meter, out, "noop")


async def retry(s: Session, n: int, meter: Meter | None, out: dict[str, float]) -> int:
    return await one_at_a_time(s, n, meter, out, "flaky")


async def workflow(s: Session, n: int, meter: Meter | None, out: dict[str, float]) -> int:
    workflows = n // (CHILDREN + 1)
    await s.empty()
    await s.pause()
    for _ in range(workflows):
        wf = s.helper.workflow("budget")
        parent = wf.add("noop", ref="parent")
        wf.group(*(step("noop") for _ in range(CHILDREN)), depends_on=[parent])
        await wf.enqueue()
    await s.analyze()
    jobs = workflows * (CHILDREN + 1)
    target = s.announced + jobs
    async with s.measured(meter, out):
        await s.resume()
        await s.ended(target, timeout(s, jobs))
    return jobs


def timeout(s: Session, jobs: int) -> float:
    return (60.0 if s.slow else 10.0) + jobs * (0.1 if s.slow else 0.01)


BODIES: dict[str, Callable[[Session, int, Meter | None, dict[str, float]], Awaitable[int]]] = {
    "enqueue_single": enqueue_single,
    "enqueue_concurrent": enqueue_concurrent,
    "enqueue_bulk": enqueue_bulk,
    "enqueue_http": enqueue_http,
    "http_work": http_work,
    "drain": drain,
    "latency": latency,
    "retry": retry,
    "workflow": workflow,
}


async def run_workload(
    s: Session, w: Workload, meter: Meter, jobs: int, breakdowns: dict[str, list[Any]]
) -> dict[str, float]:
    body = BODIES[w.key]
    await body(s, w.warmup, None, {})
    for _ in range(MEASURES):
        totals: dict[str, float] = {}
        opened = s.proxy.connections
        done = await body(s, jobs, meter, totals)
        looked_up = isinstance(meter, DatabaseMeter) and any(
            "typeinfo_tree" in q for _, q, _, _ in meter.breakdown
        )
        if s.proxy.connections == opened and not looked_up:
            break
        print(
            f"{w.key}: a connection opened, or looked up types it had not seen, while it was "
            "measured; measured again",
            file=sys.stderr,
        )
    if isinstance(meter, DatabaseMeter):
        breakdowns[w.key] = [(round(c / done, 4), q, round(p / done, 4), round(b / done, 2))
                             for c, q, p, b in meter.breakdown]  # fmt: skip
    return {f"{w.key}.{k}": v / done for k, v in totals.items()}


# -- the processes measured ---------------------------------------------------------------


def child_env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "PYTHONHASHSEED": HASH_SEED, **extra}


def callgrind(log_dir: Path, name: str) -> list[str]:
    """valgrind's command line: instrumented only once callgrind_control says so."""
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no",
            f"--callgrind-out-file={log_dir / name}.callgrind.%p",
            f"--log-file={log_dir / name}.valgrind.log"]  # fmt: skip


@contextlib.asynccontextmanager
async def process(
    command: list[str],
    env: dict[str, str],
    log: Path,
    ready: Callable[[asyncio.subprocess.Process], Awaitable[None]],
) -> AsyncIterator[int]:
    """``command`` running, once ``ready(process)`` returns; its pid. Its stdout is a
    pipe, for ``ready``, then copied to ``log`` as its stderr is. Stopped by SIGTERM."""
    out = log.open("ab")
    proc = await asyncio.create_subprocess_exec(
        *command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=out
    )
    copying = None
    try:
        waiting = asyncio.ensure_future(ready(proc))
        exited = asyncio.ensure_future(proc.wait())
        await asyncio.wait([waiting, exited], timeout=300, return_when=asyncio.FIRST_COMPLETED)
        if not waiting.done():
            waiting.cancel()
            raise RuntimeError(f"{command[-1]} did not start: see {log}\n{tail(log)}")
        exited.cancel()
        waiting.result()
        assert proc.stdout is not None
        copying = asyncio.ensure_future(copy(proc.stdout, out))  # a full pipe would block it
        yield proc.pid
    finally:
        if copying is not None:
            copying.cancel()
        out.close()
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 120)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def copy(reader: asyncio.StreamReader, out: Any) -> None:
    while line := await reader.readline():
        out.write(line)


def show_logs(directory: Path) -> None:
    for log in sorted(directory.glob("*.log")):
        progress(f"{log.name}:\n{tail(log)}")


def tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-15:]) if log.exists() else ""


@contextlib.asynccontextmanager
async def worker(s: Session, dsn: str, log_dir: Path, valgrind: bool) -> AsyncIterator[int]:
    prefix = callgrind(log_dir, "worker") if valgrind else []
    command = [*prefix, sys.executable, str(SCRIPT), "_worker", dsn]

    async def ready(proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        if await proc.stdout.readline() != b"ready\n":
            raise RuntimeError("the worker exited before it was ready")

    async with process(command, child_env(), log_dir / "worker.log", ready) as pid:
        yield pid


@contextlib.asynccontextmanager
async def api(s: Session, dsn: str, log_dir: Path, valgrind: bool) -> AsyncIterator[int]:
    port = free_port()
    prefix = callgrind(log_dir, "api") if valgrind else []
    command = [*prefix, sys.executable, str(SCRIPT), "_api"]
    # The poll interval is also how long the API trusts what it read of a queue's limit
    # (the HTTP claim's queue_limited.sql): an hour, like the worker's.
    env = child_env(DATABASE_URL=dsn, PORT=str(port), JOBQUEUE_SCHEMA=SCHEMA,
                    JOBQUEUE_LOG_LEVEL="warning",
                    POLL_INTERVAL_SECONDS=str(QUIET_SECONDS))  # fmt: skip

    async def ready(proc: asyncio.subprocess.Process) -> None:
        import httpx

        async with httpx.AsyncClient() as client:
            while True:
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                        return
                await asyncio.sleep(0.1)

    async with process(command, env, log_dir / "api.log", ready) as pid:
        s.api_port = port
        yield pid


def api_main() -> None:
    """`jobqueue api`, with nothing on a timer: the tokens reread every half second of
    requests (the budget's measure of that would be a measure of the machine's speed),
    the metrics' sampling, and an HTTP worker's row renewed by a claim a second after
    the last (worker_register.sql: counted in http_work whenever its warm-up and
    filling took longer than that, as in CI on 2026-12-07)."""
    # Here, not above: only this process loads the HTTP stack.
    from jobqueue import cli
    from jobqueue.auth import authenticator as auth
    from jobqueue.http_workers import service
    from jobqueue.observability import metrics

    auth.REFRESH_SECONDS = auth.MAX_AGE_SECONDS = QUIET_SECONDS
    metrics.FLUSH_SECONDS = QUIET_SECONDS
    service.ANNOUNCE_SECONDS = QUIET_SECONDS
    cli.main(["api"])


def worker_main(dsn: str) -> None:
    """The worker measured: the Worker as bench/jobqueue_runner.py runs it, with the
    budget's tasks, and nothing on a timer (QUIET_SECONDS)."""
    # Here, not above: the modules whose timers it lengthens are the worker's alone.
    from jobqueue.db import listener
    from jobqueue.retry import FixedDelay
    from jobqueue.schedules import runner as schedule_runner
    from jobqueue.worker import Worker, producer

    listener.PING_INTERVAL = QUIET_SECONDS
    producer.FULL_SCAN_SECONDS = QUIET_SECONDS
    schedule_runner.POLL_SECONDS = QUIET_SECONDS  # the leader's look at the schedules

    async def run() -> None:
        logs.configure("warning")
        settings = Settings(
            database_url=dsn,
            schema=SCHEMA,
            log_level="warning",
            worker_count=1000,  # the runner's default_concurrency
            poll_interval=QUIET_SECONDS,
            lease_seconds=3 * QUIET_SECONDS,  # heartbeats every third of it
            rescue_interval=QUIET_SECONDS,  # the leader's round
        )
        jq = JobQueue(settings=settings)

        @jq.task("noop")
        async def noop(payload: dict[str, Any]) -> None:
            return None

        @jq.task("flaky", retry=FixedDelay(RETRY_DELAY))
        async def flaky(payload: dict[str, Any], ctx: JobContext) -> None:
            if ctx.attempt == 1:
                raise RuntimeError("the first attempt fails, as planned")

        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        worker = Worker(await jq.pool(), jq.direct_dsn, settings, jq.tasks)
        await worker.start()
        await worker.listener.listening.wait()
        print("ready", flush=True)
        await stop.wait()
        await worker.stop(asyncio.Event())
        await jq.close()

    asyncio.run(run())


# -- the proxy that counts round trips -------------------------------------------------------

SSL_REQUEST, GSSENC_REQUEST = 80877103, 80877104


class Proxy:
    """Forwards TCP connections to the server, counting the messages clients send by
    type (b"S" Sync, b"Q" Query, b"P" Parse...). A client that waits for an answer
    ends what it sends with a Sync, a Query or a Flush: those are its round trips."""

    def __init__(self, dsn: str) -> None:
        parts = urlsplit(dsn)
        if parts.hostname is None or parts.port is None or "," in parts.netloc:
            raise CannotMeasure(f"the DSN must name one host and port: {dsn}")
        self._dsn = parts
        self.counts: Counter[bytes] = Counter()
        self.connections = 0  # opened through it so far
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        """Start listening; return the DSN that goes through the proxy."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        user = f"{self._dsn.username}@" if self._dsn.username else ""
        if self._dsn.password:
            user = f"{self._dsn.username}:{self._dsn.password}@"
        # Encrypted, the messages could not be told apart.
        query = urlencode({"sslmode": "disable"})
        return urlunsplit(self._dsn._replace(netloc=f"{user}127.0.0.1:{port}", query=query))

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def total(self) -> int:
        return sum(self.counts.values())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            host, port = self._dsn.hostname, self._dsn.port
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        down = asyncio.create_task(self._pipe(up_reader, writer))
        try:
            await self._client_messages(reader, up_writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            up_writer.close()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await down
            writer.close()
            self._tasks.discard(task)

    async def _client_messages(
        self, reader: asyncio.StreamReader, up: asyncio.StreamWriter
    ) -> None:
        while True:  # the start-up packets have no type byte
            head = await reader.readexactly(8)
            length, code = struct.unpack("!ii", head)
            up.write(head + await reader.readexactly(length - 8))
            if code not in (SSL_REQUEST, GSSENC_REQUEST):
                break
        while True:
            head = await reader.readexactly(5)
            body = await reader.readexactly(int.from_bytes(head[1:], "big") - 4)
            self.counts[head[:1]] += 1
            up.write(head + body)
            await up.drain()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()


# -- a run ------------------------------------------------------------------------------------


@contextlib.contextmanager
def server() -> Iterator[str]:
    """DATABASE_URL, or an embedded server of this run's own, preloading pg_stat_statements."""
    if os.environ.get("DATABASE_URL"):
        yield os.environ["DATABASE_URL"]
        return
    with tempfile.TemporaryDirectory(prefix="jqbudget-pg-") as data:
        embedded = EmbeddedPostgres(data, settings=SERVER_SETTINGS)
        try:
            yield embedded.start()
        finally:
            embedded.stop()


async def fresh_database(dsn: str) -> str:
    """A new database for the run, migrated, with pg_stat_statements, and autovacuum off
    on our tables, so that no vacuum or analyze changes plans or pages between runs."""
    name = f"jqbudget_{os.getpid()}"
    conn = await asyncpg.connect(dsn)
    try:
        preloaded = await conn.fetchval("SHOW shared_preload_libraries")
        if "pg_stat_statements" not in preloaded:
            raise CannotMeasure(
                "this server does not preload pg_stat_statements "
                "(shared_preload_libraries); unset DATABASE_URL to use an embedded one"
            )
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    url = urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        await migrate(conn, SCHEMA)
        tables = await conn.fetch(
            """SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
               WHERE n.nspname = $1 AND c.relkind = 'r'""",
            SCHEMA,
        )
        for t in tables:
            await conn.execute(
                f'ALTER TABLE "{SCHEMA}"."{t["relname"]}" SET (autovacuum_enabled = false)'
            )
    finally:
        await conn.close()
    return url


async def drop_database(dsn: str, url: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{urlsplit(url).path[1:]}" WITH (FORCE)')
    finally:
        await conn.close()


@dataclass
class Run:
    figures: dict[str, float]
    breakdowns: dict[str, list[Any]]
    postgresql: str
    track_planning: bool


async def measure(dsn: str, chosen: list[Workload], instructions: bool) -> Run:
    url = await fresh_database(dsn)
    s = Session(url)
    figures: dict[str, float] = {}
    breakdowns: dict[str, list[Any]] = {}
    try:
        await s.open()
        version = await s.conn.fetchval("SHOW server_version")
        track_planning = s.track_planning
        with tempfile.TemporaryDirectory(prefix="jqbudget-") as tmp:
            log_dir = Path(tmp)
            try:
                await measure_all(s, chosen, instructions, log_dir, figures, breakdowns)
            except BaseException:
                show_logs(log_dir)
                raise
    finally:
        await s.close()
        await drop_database(dsn, url)
    return Run(figures, breakdowns, version, track_planning)


async def measure_all(
    s: Session,
    chosen: list[Workload],
    instructions: bool,
    logs: Path,
    figures: dict[str, float],
    breakdowns: dict[str, list[Any]],
) -> None:
    meter = DatabaseMeter(s)
    for w in chosen:
        if w.process == "":
            progress(f"{w.key}: {w.jobs} jobs")
            figures.update(await run_workload(s, w, meter, w.jobs, breakdowns))
    if any(w.process == "api" for w in chosen):
        async with api(s, s.proxy_dsn, logs, valgrind=False):
            for w in chosen:
                if w.process == "api":
                    progress(f"{w.key}: {w.jobs} jobs")
                    figures.update(await run_workload(s, w, meter, w.jobs, breakdowns))
    if any(w.process == "worker" for w in chosen):
        async with worker(s, s.proxy_dsn, logs, valgrind=False):
            for w in chosen:
                if w.process == "worker":
                    progress(f"{w.key}: {w.jobs} jobs")
                    figures.update(await run_workload(s, w, meter, w.jobs, breakdowns))
    if not instructions:
        return
    s.slow = True
    for kind, start in (("worker", worker), ("api", api)):
        measured = [w for w in chosen if w.process == kind and w.jobs_valgrind]
        if not measured:
            continue
        progress(f"{kind} under callgrind: starting")
        async with start(s, s.dsn, logs, True) as pid:
            await callgrind_control("-i", "on", str(pid))
            for w in measured:
                progress(f"{w.key} under callgrind: {w.jobs_valgrind} jobs")
                found = await run_workload(s, w, CallgrindMeter(pid), w.jobs_valgrind, {})
                figures.update(found)
    s.slow = False


# -- the budget file and the verdicts ---------------------------------------------------------


def figure_info(key: str) -> tuple[str, str]:
    """(unit, what it counts) of a figure such as "drain.statements"."""
    workload_key, metric = key.split(".")
    w = next(w for w in WORKLOADS if w.key == workload_key)
    unit, counts = METRICS[metric]
    jobs = w.jobs_valgrind if metric == "instructions" else w.jobs
    counts = counts.format(process=w.process)
    return unit, f"{counts}; per job of: {w.what.format(n=f'{jobs:,}')}"


def rounded(value: float) -> float:
    """Four significant digits, at most four decimals, whole from 1,000 on: figures and
    tolerances alike."""
    if abs(value) >= 1000:
        return round(value)
    if value == 0:
        return 0
    return round(value, max(0, min(4, 3 - int(f"{abs(value):e}".split("e")[1]))))


@dataclass
class Verdict:
    key: str
    measured: float | None
    budget: float | None
    tolerance: float | None

    @property
    def word(self) -> str:
        if self.measured is None:
            return "not measured"
        if self.budget is None or self.tolerance is None:
            return "no budget"
        if self.measured > self.budget + self.tolerance:
            return "OVER"
        if self.measured < self.budget - self.tolerance:
            return "under (record?)"
        return "ok"


def verdicts(figures: dict[str, float], budget: dict[str, Any]) -> list[Verdict]:
    entries = budget.get("figures", {})
    keys = sorted({*figures, *entries}, key=order)
    out = []
    for key in keys:
        entry = entries.get(key, {})
        out.append(Verdict(key, figures.get(key), entry.get("budget"), entry.get("tolerance")))
    return out


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:,.4f}".rstrip("0").rstrip(".") if value else "0"


def table(results: list[Verdict]) -> str:
    rows = [("figure", "measured", "budget", "tolerance", "verdict")]
    for v in results:
        unit = figure_info(v.key)[0] if v.key.split(".")[0] in BODIES else ""
        label = f"{v.key} ({unit})" if unit else v.key
        tolerance = "-" if v.tolerance is None else f"±{fmt(v.tolerance)}"
        rows.append((label, fmt(v.measured), fmt(v.budget), tolerance, v.word))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join(
        "  ".join(c.ljust(w) if i in (0, 4) else c.rjust(w)
                  for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
        for r in rows
    )  # fmt: skip


ABOUT = [
    "The cost budget that `python bench/budget.py` holds the code to (docs/budget.md).",
    "Each figure is a cost per job of one workload, counted, not timed. It passes while "
    "measured <= budget + tolerance; above that, bench/budget.py exits 1.",
    "budget: what the code spent when recorded (`--record`: one run; `--calibrate N`: the "
    "median of N runs).",
    "tolerance: how far above its budget a figure may go, from its spread over the runs of "
    "the last calibration (`--calibrate N`): see tolerance_rule; 0 where every run agreed.",
    "A change that must spend more raises the budget in the same commit (`--record`), "
    "and its commit message says why.",
]
TOLERANCE_RULE = (
    "1.5 times the largest deviation from the median over the calibration's runs, plus a "
    "margin: 2% of the median if the runs differed at all (0 where they all agreed); for "
    "the statements, round trips and plans of the workloads whose jobs share statements "
    "as timing has it (enqueue_concurrent, drain, workflow), 25% of the median whatever "
    "the runs gave, since a busier machine batches them otherwise, and 15% for their "
    "instructions, which the same batching moves (workflow's gave 93,621 once in CI "
    "against a spread of 84,037 to 85,579); for round trips at "
    f"least {PREPARES} per workload: the prepares of a pooled connection that the warm-up "
    "happened not to use; and for buffers and WAL records at least "
    f"{TURN_BUFFERS} and {TURN_WAL_RECORDS} per workload: the counters' changes crossing "
    "from one partition to the other as timing has it (migration 0025)"
)


def tolerance(key: str, values: list[float]) -> float:
    """See TOLERANCE_RULE."""
    workload, metric = key.split(".")
    w = next(w for w in WORKLOADS if w.key == workload)
    median = statistics.median(values)
    deviation = max(abs(v - median) for v in values)
    margin = 0.02 * median if deviation else 0.0
    if w.batched and metric in ("statements", "round_trips", "plans"):
        margin = 0.25 * median
    elif w.batched and metric == "instructions":  # a claim's cost shared by fewer jobs
        margin = 0.15 * median
    found = 1.5 * deviation + margin
    if metric == "round_trips":
        found = max(found, PREPARES / w.jobs)
    elif metric == "buffers":
        found = max(found, TURN_BUFFERS / w.jobs)
    elif metric == "wal_records":
        found = max(found, TURN_WAL_RECORDS / w.jobs)
    return rounded(found)


def write_budget(
    path: Path, runs: list[Run], calibrate: bool, only: list[str] | None = None
) -> dict[str, Any]:
    """Write the figures of ``runs`` as the budgets. With ``only`` (--only), the other
    workloads' figures, the calibration they came from and the rule their tolerances
    were drawn by are kept as they were, and each workload calibrated here is named
    in the calibration."""
    old = json.loads(path.read_text()) if path.exists() else {}
    old_figures = old.get("figures", {})
    figures: dict[str, Any] = {}
    keys = list(dict.fromkeys(k for r in runs for k in r.figures))
    for key in keys:
        values = [r.figures[key] for r in runs if key in r.figures]
        unit, counts = figure_info(key)
        entry: dict[str, Any] = {"unit": unit, "counts": counts,
                                 "budget": rounded(statistics.median(values))}  # fmt: skip
        kept = old_figures.get(key, {})
        if calibrate:
            entry["tolerance"] = tolerance(key, values)
            entry["spread"] = {"runs": len(values), "min": rounded(min(values)),
                               "median": rounded(statistics.median(values)),
                               "max": rounded(max(values))}  # fmt: skip
        else:  # the noise is the calibration's; a recording moves the budget only
            entry["tolerance"] = kept.get("tolerance", 0.0)
            if "spread" in kept:
                entry["spread"] = kept["spread"]
        figures[key] = entry
    for key, entry in old_figures.items():  # figures this run did not measure (--only)
        figures.setdefault(key, entry)
    recorded = {
        "date": datetime.date.today().isoformat(),
        "commit": git_commit(),
        "runs": len(runs),
        "postgresql": runs[0].postgresql,
        "python": sys.version.split()[0],
        "valgrind": valgrind_version(),
    }
    calibration = old.get("calibration")
    rule = TOLERANCE_RULE
    if calibrate:
        this = {"date": recorded["date"], "commit": recorded["commit"], "runs": len(runs)}
        calibration = this
        if only:
            calibration = {**(old.get("calibration") or {}), **dict.fromkeys(only, this)}
    if only:
        rule = old.get("tolerance_rule", TOLERANCE_RULE)
    budget = {
        "about": ABOUT,
        "tolerance_rule": rule,
        "recorded": recorded,
        "calibration": calibration,
        "figures": dict(sorted(figures.items(), key=lambda kv: order(kv[0]))),
    }
    # One line per spread: the file is read by people as much as by this script.
    text = json.dumps(budget, indent=2)
    text = re.sub(r'"spread": \{[^}]*\}', lambda m: " ".join(m[0].split()), text)
    path.write_text(text + "\n")
    return budget


def order(key: str) -> tuple[int, int]:
    workload, metric = key.split(".")
    keys = [w.key for w in WORKLOADS]
    return (keys.index(workload) if workload in keys else len(keys),
            list(METRICS).index(metric) if metric in METRICS else len(METRICS))  # fmt: skip


def git_commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE,
                          capture_output=True, text=True, check=False)  # fmt: skip
    # Changes to the code measured, not to the budget file or the documentation.
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                            "../src", ".", ":!budget.json"], cwd=HERE,
                           capture_output=True, text=True, check=False)  # fmt: skip
    commit = done.stdout.strip() or "unknown"
    return f"{commit}+changes" if dirty.stdout.strip() else commit


def valgrind_version() -> str | None:
    if shutil.which("valgrind") is None:
        return None
    done = subprocess.run(["valgrind", "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip().removeprefix("valgrind-")


def progress(message: str) -> None:
    print(f"[budget] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/budget.py",
                                     description=__doc__.split("\n")[0])  # fmt: skip
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--record",
        action="store_true",
        help="write this run's figures as the budgets (tolerances kept)",
    )
    what.add_argument(
        "--calibrate",
        type=int,
        metavar="N",
        help="run N times; write the medians as budgets, tolerances from spread",
    )
    parser.add_argument(
        "--only",
        default="",
        help="workloads, comma-separated: " + ", ".join(w.key for w in WORKLOADS),
    )
    parser.add_argument(
        "--skip-instructions",
        action="store_true",
        help="no callgrind run (quicker; the instruction figures are skipped)",
    )
    parser.add_argument("--budget", type=Path, default=BUDGET_FILE, help="the budget file")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--verbose", action="store_true", help="also print where each workload's statements went"
    )
    args = parser.parse_args(argv)
    only = [k for k in args.only.split(",") if k]
    unknown = [k for k in only if k not in BODIES]
    if unknown:
        parser.error(f"unknown workload {unknown[0]!r}")
    if args.calibrate is not None and args.calibrate < 2:
        parser.error("--calibrate needs at least 2 runs")
    chosen = [w for w in WORKLOADS if not only or w.key in only]
    instructions = not args.skip_instructions
    if instructions and (shutil.which("valgrind") is None
                         or shutil.which("callgrind_control") is None):  # fmt: skip
        raise CannotMeasure("valgrind is not installed (Debian: apt-get install valgrind); "
                         "or pass --skip-instructions")  # fmt: skip

    logs.configure("warning")  # not the migrations' lines
    started = time.monotonic()
    runs: list[Run] = []
    for i in range(args.calibrate or 1):
        if args.calibrate:
            progress(f"run {i + 1}/{args.calibrate}")
        # A server of its own for each run, as each run in CI has: a server's first
        # run and its later ones touch different buffers.
        with server() as dsn:
            runs.append(asyncio.run(measure(dsn, chosen, instructions)))
    seconds = time.monotonic() - started

    if args.record or args.calibrate:
        write_budget(args.budget, runs, calibrate=bool(args.calibrate), only=only)
        progress(f"wrote {args.budget}")
    budget = json.loads(args.budget.read_text()) if args.budget.exists() else {}
    last = runs[-1]
    measured = {k: rounded(v) for k, v in last.figures.items()}
    results = [v for v in verdicts(measured, budget)
               if not only or v.key.split(".")[0] in only]  # fmt: skip
    if not instructions:
        results = [v for v in results if not v.key.endswith(".instructions")]
    over = [v for v in results if v.word == "OVER"]
    if args.json:
        verdict = {v.key: v.word for v in results}
        print(json.dumps({"figures": measured, "verdicts": verdict,
                          "statements": last.breakdowns}, indent=2))  # fmt: skip
        return 1 if over else 0
    print(table(results))
    recorded = budget.get("recorded", {})
    print(f"\nPostgreSQL {last.postgresql}; budget recorded on PostgreSQL "
          f"{recorded.get('postgresql', '?')} at {recorded.get('commit', '?')} "
          f"({recorded.get('date', '?')}); took {seconds:.0f} s")  # fmt: skip
    if not last.track_planning:
        print("pg_stat_statements.track_planning is off on this server: no plans counted, "
              "and the buffers leave planning out.")  # fmt: skip
    if recorded.get("postgresql", "").split(".")[0] != last.postgresql.split(".")[0]:
        print("Another major version of PostgreSQL than the budget's: buffers, plans and WAL "
              "records may differ for that alone.")  # fmt: skip
    shown = {v.key.split(".")[0] for v in over} if not args.verbose else set(last.breakdowns)
    for key in [w.key for w in WORKLOADS if w.key in shown & set(last.breakdowns)]:
        print(f"\n{key}: per job, by statement: calls, plans, buffers")
        for calls, query, plans, buffers in last.breakdowns[key]:
            print(f"  {calls:>9} {plans:>9} {buffers:>9}  {query}")
    if over:
        print(f"\nOver budget: {', '.join(v.key for v in over)}. If the change must spend "
              "more, raise the budget in the same commit (--record) and say why in its "
              "message (docs/budget.md).")  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["_worker"]:
        worker_main(sys.argv[2])
        sys.exit(0)
    if sys.argv[1:2] == ["_api"]:
        api_main()
        sys.exit(0)
    try:
        sys.exit(main())
    except CannotMeasure as exc:
        print(f"budget: {exc}", file=sys.stderr)
        sys.exit(2)
