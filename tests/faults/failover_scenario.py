"""A failover under load, as tests/faults/test_failover.py checks it and
bench/failover.py measures it:

    with Replicated.make(root) as pair:
        run = fail_over_under_load(pair, root)   # a FailoverRun: what every side saw

Real processes on the pair's multi-host DSN: ``jobqueue worker --processes 2`` and
``jobqueue api``, running tests/apps/ledger_app.py (each attempt a ledger row). Clients
enqueue over HTTP all along, recording every answer. The primary crashes (``pg_ctl
stop -m immediate``); ``outage`` seconds later, as an orchestrator would after
noticing, the standby is promoted. Clients go on until the API has stored jobs on the
new primary for ``after`` seconds; then every acknowledged job is waited for, the
processes are stopped (SIGTERM) and their exit codes, logs and the ledger collected.

Run on a ``Lone`` server instead, the same crash is followed by a restart: the
reference that bench/failover.py compares the failover with.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from jobqueue.db.migrate import migrate
from tests.apps.ledger_app import create_ledger
from tests.conftest import APPS, Process, free_ports
from tests.faults.replication import Lone, Replicated

LEASE = 2.0
RESCUE_INTERVAL = 0.5
CLIENTS = 2
CLIENT_PAUSE = 0.01  # between one client's requests: a steady load the workers keep up with
# Longer than any answer the API may give: its connect timeout (5 s per host) and the
# enqueue's retries of it. A request still unanswered then is a hang.
CLIENT_TIMEOUT = 30.0
SCHEMA = "jobqueue"


@dataclass
class Answer:
    sent: float  # time.monotonic()
    answered: float
    status: int | None  # None: no answer within CLIENT_TIMEOUT
    body: Any


@dataclass
class FailoverRun:
    answers: list[Answer]
    stopped: float  # time.monotonic() once the primary is gone
    promoted: float  # ... when the standby is told to take over (or the server to start)
    # Seconds from ``stopped`` to the first job completed by the new primary's clock
    # (None: none was), and to the first 201 of a request sent after it.
    first_completion: float | None
    first_201: float | None
    statuses: dict[int, str]  # of every acknowledged job, on the new primary
    ledger: list[tuple[int, int]]  # (job id, attempt) of every attempt run
    logs: dict[str, str] = field(default_factory=dict)
    exit_codes: dict[str, int | None] = field(default_factory=dict)

    @property
    def accepted(self) -> list[int]:
        return [a.body["id"] for a in self.answers if a.status == 201]

    @property
    def outage(self) -> float:
        return self.promoted - self.stopped

    def since_promotion(self, seconds: float | None) -> float | None:
        return None if seconds is None else seconds - self.outage


def fail_over_under_load(
    pair: Replicated | Lone,
    root: Path,
    *,
    before: float = 3.0,
    outage: float = 2.0,
    after: float = 3.0,
    settle: float = 90.0,
) -> FailoverRun:
    """``settle``: how long the acknowledged jobs may take to complete after the load."""
    asyncio.run(_prepare(pair.setup_dsn))
    port = free_ports(1, besides=0)[0]
    env = {
        **os.environ,
        "DATABASE_URL": pair.dsn,
        "JOBQUEUE_SCHEMA": SCHEMA,
        "JOBQUEUE_APP": "ledger_app:jq",
        "PORT": str(port),
        "WORKER_COUNT": "4",
        "POLL_INTERVAL_SECONDS": "0.5",
        "JOBQUEUE_LEASE_SECONDS": str(LEASE),
        "JOBQUEUE_RESCUE_INTERVAL": str(RESCUE_INTERVAL),
        "RETRY_DELAY_SECONDS": "0",
        "MAX_ATTEMPTS": "25",  # an attempt cut by the crash is only retried
        "JOBQUEUE_METRICS": "off",
        "PYTHONPATH": f"{APPS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    processes = {
        "workers": Process(["worker", "--processes", "2"], env, root / "workers.log"),
        "api": Process(["api"], env, root / "api.log"),
    }
    base = f"http://127.0.0.1:{port}"
    try:
        processes["api"].wait_http(base, timeout=30)
        _wait_for_count(processes["workers"], "worker started", 2)
        answers, stopped, stopped_at, promoted = asyncio.run(
            _load_and_fail_over(pair, base, before, outage, after)
        )
        accepted = [a.body["id"] for a in answers if a.status == 201]
        statuses, ledger, first_done = asyncio.run(
            _outcome(pair.current_dsn, accepted, stopped_at, settle)
        )
        exit_codes = {name: _terminate(p) for name, p in processes.items()}
    finally:
        for p in processes.values():
            if p.popen.poll() is None:
                p.popen.kill()
                p.popen.wait()
            p.close()
    after_stop = [a for a in answers if a.sent >= stopped and a.status == 201]
    return FailoverRun(
        answers=answers,
        stopped=stopped,
        promoted=promoted,
        first_completion=first_done,
        first_201=min(a.answered for a in after_stop) - stopped if after_stop else None,
        statuses=statuses,
        ledger=ledger,
        logs={name: p.output for name, p in processes.items()},
        exit_codes=exit_codes,
    )


async def _prepare(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn, SCHEMA)
        await create_ledger(conn, SCHEMA)
    finally:
        await conn.close()


async def _load_and_fail_over(
    pair: Replicated | Lone, base: str, before: float, outage: float, after: float
) -> tuple[list[Answer], float, float, float]:
    """Every answer, and when the primary was gone (monotonic, and epoch seconds for the
    server's timestamps) and when the standby was told to take over."""
    answers: list[Answer] = []
    done = asyncio.Event()

    async def client(http: httpx.AsyncClient) -> None:
        while not done.is_set():
            sent = time.monotonic()
            try:
                r = await http.post("/jobs", json={"type": "record"})
                json = r.headers.get("content-type", "").startswith("application/json")
                body = r.json() if json else r.text  # a 500's body is plain text
                answers.append(Answer(sent, time.monotonic(), r.status_code, body))
            except httpx.TimeoutException:
                answers.append(Answer(sent, time.monotonic(), None, None))
            await asyncio.sleep(CLIENT_PAUSE)

    async with httpx.AsyncClient(base_url=base, timeout=CLIENT_TIMEOUT) as http:
        clients = [asyncio.create_task(client(http)) for _ in range(CLIENTS)]
        try:
            await asyncio.sleep(before)
            await asyncio.to_thread(pair.crash)
            stopped, stopped_at = time.monotonic(), time.time()
            await asyncio.sleep(outage)
            promoted = time.monotonic()
            await asyncio.to_thread(pair.recover)
            deadline = promoted + 60
            while not any(a.status == 201 and a.sent >= promoted for a in answers):
                if time.monotonic() > deadline:
                    break  # the caller sees that no 201 came after the promotion
                await asyncio.sleep(0.05)
            await asyncio.sleep(after)
        finally:
            done.set()
            await asyncio.gather(*clients)
    return answers, stopped, stopped_at, promoted


async def _outcome(
    dsn: str, accepted: list[int], stopped_at: float, settle: float
) -> tuple[dict[int, str], list[tuple[int, int]], float | None]:
    """The acknowledged jobs' statuses once all completed (or ``settle`` s passed), the
    ledger, and when the first job completed after ``stopped_at`` (epoch seconds)."""
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + settle
        while True:
            rows = await conn.fetch(
                f'SELECT id, status FROM "{SCHEMA}".jobs WHERE id = ANY($1::bigint[])', accepted
            )
            statuses = {r["id"]: r["status"] for r in rows}
            finished = all(s == "completed" for s in statuses.values())
            if (finished and len(statuses) == len(accepted)) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        ledger = [
            (r["job_id"], r["attempt"])
            for r in await conn.fetch(f'SELECT job_id, attempt FROM "{SCHEMA}".ledger')
        ]
        first = await conn.fetchval(
            f"""SELECT extract(epoch FROM min(finished_at)) - $1 FROM "{SCHEMA}".jobs
                WHERE status = 'completed' AND finished_at > to_timestamp($1)""",
            stopped_at,
        )
        return statuses, ledger, None if first is None else float(first)
    finally:
        await conn.close()


def _wait_for_count(process: Process, text: str, count: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while process.output.count(text) < count:
        if process.popen.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{count} x {text!r} not printed:\n{process.output[-3000:]}")
        time.sleep(0.05)


def _terminate(process: Process) -> int | None:
    """SIGTERM, as a deployment stops it; its exit code (None: still running after 30 s)."""
    if process.popen.poll() is None:
        process.popen.send_signal(signal.SIGTERM)
        try:
            process.popen.wait(30)
        except subprocess.TimeoutExpired:
            return None
    return process.popen.returncode
