"""Workers of three languages on one queue, against real `jobqueue api` processes: a
TypeScript worker (clients/typescript), a Go worker (clients/go) and a Python worker
drain 2,000 jobs together, each job run and completed exactly once, by the worker its
result names, each of the three taking part; and a worker waiting on a long poll
outlives a restart of the API process it waits on, whether the new one (on the same
port) is up within its claim request's retries or only after its claim loop's: it
claims again from the new one, and runs each job enqueued there exactly once, none
lost."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.acceptance import test_go_client as go_client
from tests.acceptance import test_typescript_client as ts_client
from tests.acceptance.http_worker_support import auth, registered, start_api
from tests.acceptance.test_auth import make_token
from tests.conftest import Process, Spawn

pytestmark = pytest.mark.anyio

# The two clients' fixtures, made this module's so that pytest finds them here: the
# TypeScript client built and its worker started (node), the Go worker built and
# started (go_spawn).
built = ts_client.built
node = ts_client.node
go_env = go_client.go_env
go_worker = go_client.go_worker
go_spawn = go_client.go_spawn

WORK = ["jobs:work", "jobs:enqueue", "jobs:read", "payloads:read", "jobs:control"]
TYPE = "mark"

# The Python worker's application: a handler that works the payload's "ms"
# milliseconds, as the TypeScript worker's (slow) and the Go worker's (sleep) do, then
# records its run in a ledger file and names itself in its result.
PYTHON_APP = """
import asyncio
import os
from typing import Any

from jobqueue import JobContext, JobQueue

jq = JobQueue()


@jq.task("mark")
async def mark(payload: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    await asyncio.sleep(payload.get("ms", 0) / 1000)
    with open(os.environ["LEDGER_FILE"], "a") as ledger:
        ledger.write(f"{ctx.id} {ctx.attempt} python\\n")
    return {"worker": "python", "id": ctx.id, "attempt": ctx.attempt}
"""


def python_worker(
    spawn: Spawn, env: dict[str, str], tmp_path: Path, queue: str
) -> tuple[Process, Path]:
    """A `jobqueue worker` of 10 slots running PYTHON_APP on ``queue``, and its ledger."""
    (tmp_path / "mixed_workers_app.py").write_text(PYTHON_APP)
    ledger = tmp_path / "python.ledger"
    worker_env = {
        **env,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}",
        "LEDGER_FILE": str(ledger),
        "JOBQUEUE_LOG_LEVEL": "info",
    }
    args = ["worker", "--app", "mixed_workers_app:jq", "--queue", queue, "--worker-count", "10"]
    worker = spawn(args, worker_env, name="python-worker")
    worker.wait_for_output("worker started")
    return worker, ledger


async def enqueue_batch(
    client: httpx.AsyncClient, token: str, queue: str, payloads: list[dict[str, Any]]
) -> list[int]:
    jobs = [{"type": TYPE, "queue": queue, "payload": p} for p in payloads]
    answer = await client.post("/jobs/batch", json={"jobs": jobs}, headers=auth(token))
    assert answer.status_code == 201, answer.text
    ids: list[int] = answer.json()["ids"]
    assert len(ids) == len(payloads)
    return ids


async def completed(
    db: asyncpg.Connection, schema: str, count: int, timeout: float, *workers: Any
) -> None:
    """Once ``count`` jobs completed, polled until a deadline; the workers must live."""
    deadline = time.monotonic() + timeout
    while (
        done := await db.fetchval(
            f"SELECT count(*) FROM \"{schema}\".jobs WHERE status = 'completed'"
        )
    ) < count:
        assert time.monotonic() < deadline, f"only {done} of {count} completed in {timeout}s"
        for worker in workers:
            assert worker.popen.poll() is None, worker.output[-5000:]
        await asyncio.sleep(0.05)


def ts_runs(output: str) -> list[int]:
    """The TypeScript worker's ledger: `ran <job id> <payload id>`, a line a run."""
    return [int(m[1]) for m in re.finditer(r"^ran (\d+) \d+$", output, re.M)]


def ledger_runs(path: Path) -> list[tuple[int, int, str]]:
    """A ledger file's runs: (job id, attempt, worker), a line a run."""
    if not path.exists():
        return []
    return [
        (int(job_id), int(attempt), who)
        for job_id, attempt, who in (line.split() for line in path.read_text().splitlines())
    ]


JOBS = 2000
WORK_MS = 10  # each job's work: long enough that no one worker takes them all


async def test_a_typescript_a_go_and_a_python_worker_drain_2000_jobs_each_run_once(
    spawn: Spawn,
    env: dict[str, str],
    db: asyncpg.Connection,
    schema: str,
    node: type[ts_client.NodeProcess],
    go_spawn: go_client.GoSpawn,
    tmp_path: Path,
) -> None:
    base, _ = start_api(spawn, env)
    token = await make_token(db, schema, "mixed", WORK)
    queue = "mixed"
    # All three are waiting for work before any is enqueued.
    python, python_ledger = python_worker(spawn, env, tmp_path, queue)
    ts = node(
        ts_client.WORKER_SCRIPT,
        ts_client.ts_worker_env(
            base, token, name="ts-mixed", mode="slow", type=TYPE, queue=queue, concurrency=50
        ),
    )
    go_ledger = tmp_path / "go.ledger"
    go = go_spawn(
        base, token, "go-mixed", "-queue", queue, "-type", TYPE, "-mode", "sleep",
        "-concurrency", "50", "-wait", "10", "-ledger", str(go_ledger),
    )  # fmt: skip
    go.wait_for("worker go-mixed started")

    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        await registered(client, token, "http:mixed:ts-mixed")
        await registered(client, token, "http:mixed:go-mixed")
        started = time.monotonic()
        payloads = [{"ms": WORK_MS, "id": n} for n in range(JOBS)]
        ids = await enqueue_batch(client, token, queue, payloads)
        await completed(db, schema, JOBS, 180, ts, go, python)
        seconds = time.monotonic() - started
    assert ts.stop() == 0, ts.output[-5000:]
    assert go.stop() == 0, go.output[-5000:]
    assert python.stop() == 0, python.output[-5000:]

    # The ledgers: each job ran once, at its first attempt, by one of the three.
    runs = [(job_id, 1, "ts-mixed") for job_id in ts_runs(ts.output)]
    runs += ledger_runs(go_ledger) + ledger_runs(python_ledger)
    assert collections.Counter(job_id for job_id, _, _ in runs) == dict.fromkeys(ids, 1)
    assert {attempt for _, attempt, _ in runs} == {1}
    ran_by = {job_id: who for job_id, _, who in runs}

    # The jobs: each completed at its first attempt, its result naming the worker whose
    # ledger has it; no attempt failed.
    rows = await db.fetch(
        f'SELECT id, status, attempts, payload, result FROM "{schema}".jobs ORDER BY id'
    )
    assert [r["id"] for r in rows] == ids
    for row in rows:
        assert (row["status"], row["attempts"]) == ("completed", 1), dict(row)
        result = json.loads(row["result"])
        who = ran_by[row["id"]]
        if who == "ts-mixed":
            n = json.loads(row["payload"])["id"]
            expected = {"by": "typescript", "worker": "ts-mixed", "id": n}
        else:
            expected = {"worker": who, "id": row["id"], "attempt": 1}
        assert result == expected, (dict(row), who)
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".job_attempts') == 0

    by_worker = collections.Counter(ran_by.values())
    assert set(by_worker) == {"ts-mixed", "go-mixed", "python"}, by_worker
    ts_stats = json.loads(ts.wait_for(r"^stats (\{.*\})$")[1])
    assert (ts_stats["completed"], ts_stats["failed"], ts_stats["lost"]) == (
        by_worker["ts-mixed"], 0, 0
    ), ts_stats  # fmt: skip
    go_stats = json.loads(go.wait_for(r"stats (\{.*\})")[1])
    assert (go_stats["completed"], go_stats["failed"], go_stats["lost"]) == (
        by_worker["go-mixed"], 0, 0
    ), go_stats  # fmt: skip
    print(
        f"\n{JOBS} jobs of {WORK_MS} ms drained in {seconds:.2f}s: "
        f"{by_worker['ts-mixed']} by the TypeScript worker (50 slots), "
        f"{by_worker['go-mixed']} by the Go worker (50 slots), "
        f"{by_worker['python']} by the Python worker (10 slots)"
    )


AFTER_RESTART = 200


@pytest.mark.parametrize("outage", ["brief", "long"])
@pytest.mark.parametrize("language", ["typescript", "go"])
async def test_a_waiting_worker_outlives_an_api_restart_and_runs_each_job_once(
    language: str,
    outage: str,
    request: pytest.FixtureRequest,
    spawn: Spawn,
    env: dict[str, str],
    db: asyncpg.Connection,
    schema: str,
    tmp_path: Path,
) -> None:
    base, first = start_api(spawn, env)
    token = await make_token(db, schema, "restart", WORK)
    queue = "restart"
    name = f"{language}-restart"
    go_ledger = tmp_path / "go.ledger"
    worker: ts_client.NodeProcess | go_client.GoProcess
    if language == "typescript":
        node = request.getfixturevalue("node")
        worker = node(
            ts_client.WORKER_SCRIPT,
            ts_client.ts_worker_env(base, token, name=name, type=TYPE, queue=queue),
        )
    else:
        go_spawn = request.getfixturevalue("go_spawn")
        worker = go_spawn(
            base, token, name, "-queue", queue, "-type", TYPE, "-wait", "10",
            "-ledger", str(go_ledger),
        )  # fmt: skip

    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        # Its claim has begun: with nothing due, it waits (a 10 s long poll).
        await registered(client, token, f"http:restart:{name}")
    # SIGTERM: the waiting claim is answered at once, and the process ends.
    stopping = time.monotonic()
    assert await asyncio.to_thread(first.stop) == 0, first.output[-5000:]
    assert worker.popen.poll() is None, worker.output[-5000:]
    if outage == "long":
        # The API stays down until the worker's claim ran out of its request's retries
        # (connection refused, each time): its claim loop backs off and claims again.
        await asyncio.to_thread(worker.wait_for, "claim failed", 60)
    second = spawn(["api"], env, name="api")  # the same port
    await asyncio.to_thread(second.wait_http, base)
    restarted = time.monotonic() - stopping

    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        enqueued = time.monotonic()
        payloads = [{"id": n} for n in range(AFTER_RESTART)]
        ids = await enqueue_batch(client, token, queue, payloads)
        # The worker's retries back off up to 15 s between claims: a generous deadline.
        await completed(db, schema, AFTER_RESTART, 120, worker)
        seconds = time.monotonic() - enqueued
    assert worker.popen.poll() is None, worker.output[-5000:]
    assert worker.stop() == 0, worker.output[-5000:]

    if language == "typescript":
        runs = ts_runs(worker.output)
    else:
        ledger = ledger_runs(go_ledger)
        assert {(attempt, who) for _, attempt, who in ledger} == {(1, name)}, ledger
        runs = [job_id for job_id, _, _ in ledger]
    assert collections.Counter(runs) == dict.fromkeys(ids, 1)
    rows = await db.fetch(
        f'SELECT id, status, attempts, payload, result FROM "{schema}".jobs ORDER BY id'
    )
    assert [r["id"] for r in rows] == ids
    for row in rows:
        assert (row["status"], row["attempts"]) == ("completed", 1), dict(row)
        if language == "typescript":
            n = json.loads(row["payload"])["id"]
            expected = {"by": "typescript", "worker": name, "id": n}
        else:
            expected = {"worker": name, "id": row["id"], "attempt": 1}
        assert json.loads(row["result"]) == expected, dict(row)
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".job_attempts') == 0
    stats = json.loads(worker.wait_for(r"stats (\{.*\})")[1])
    assert (stats["completed"], stats["failed"], stats["lost"]) == (AFTER_RESTART, 0, 0), stats
    retried = len(re.findall(r"claim failed", worker.output))
    print(
        f"\n{language}, {outage} outage: the API was down {restarted:.2f}s; "
        f"{AFTER_RESTART} jobs enqueued on the new process completed in {seconds:.2f}s; "
        f"the worker logged {retried} failed claim(s) on its way back"
    )
