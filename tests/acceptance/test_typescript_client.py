"""The TypeScript client (clients/typescript) against real `jobqueue api` processes: its
committed types are what openapi-typescript makes of the live OpenAPI document; its
own tests (node --test) pass; a TypeScript worker and a Python worker drain 2,000 jobs
of one queue, each completed exactly once; a TypeScript worker killed mid-job loses it
to the rescuer, and its late `complete` is refused with 409; a cancel reaches a running
TypeScript handler's AbortSignal."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.acceptance import http_worker_support as support
from tests.acceptance.http_worker_support import auth, registered
from tests.acceptance.test_auth import make_token
from tests.conftest import ROOT, Process, Spawn

pytestmark = pytest.mark.anyio

CLIENT = ROOT / "clients" / "typescript"
WORK = ["jobs:work", "jobs:enqueue", "jobs:read", "payloads:read", "jobs:control", "jobs:signal"]
WORKER_SCRIPT = "build/test/fixtures/worker.js"


def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        args, cwd=CLIENT, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="session")
def built() -> Path:
    """The client built (dist/) and its tests compiled (build/); `npm ci` first when
    node_modules is absent (its `prepare` builds the package). Built once per test run:
    with the tests spread over processes (pytest -n), the first to get here builds, under
    a lock, and the others use what it built rather than rewrite files being run."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.fail("Node.js and npm build the TypeScript client: apt-get install nodejs npm")
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID", f"pid-{os.getpid()}")
    with (CLIENT / ".build.lock").open("a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.seek(0)
        if lock.read() != run_id:
            if not (CLIENT / "node_modules").is_dir():
                run(npm, "ci", "--no-audit", "--no-fund")
            run(npm, "run", "build")
            run(npm, "run", "build:test")
            lock.truncate(0)
            lock.write(run_id)
    return CLIENT


class NodeProcess:
    """``node SCRIPT`` as a real subprocess in clients/typescript, its output in a file."""

    def __init__(self, script: str, env: dict[str, str], log: Path) -> None:
        self.log_path = log
        self._log = log.open("wb")
        self.popen = subprocess.Popen(
            ["node", script], env=env, cwd=CLIENT, stdout=self._log, stderr=subprocess.STDOUT
        )

    @property
    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """The first match of ``pattern`` in the output, once it is printed."""
        deadline = time.monotonic() + timeout
        while (found := re.search(pattern, self.output, re.M)) is None:
            if self.popen.poll() is not None:
                raise AssertionError(f"exited before printing {pattern!r}:\n{self.output}")
            assert time.monotonic() < deadline, f"{pattern!r} not printed:\n{self.output}"
            time.sleep(0.05)
        return found

    def stop(self) -> int:
        """SIGTERM: the worker drains and exits."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            self.popen.wait(60)
        self._log.close()
        return self.popen.returncode


@pytest.fixture
def node(tmp_path: Path, built: Path) -> Iterator[type[NodeProcess]]:
    """Starts node processes (``node(script, env)``); any still running are killed."""
    started: list[NodeProcess] = []

    class Started(NodeProcess):
        def __init__(self, script: str, env: dict[str, str]) -> None:
            super().__init__(script, env, tmp_path / f"node-{len(started)}.log")
            started.append(self)

    yield Started
    for proc in started:
        if proc.popen.poll() is None:
            proc.popen.kill()
            proc.popen.wait()
        proc._log.close()


api = support.api  # a fixture


def ts_worker_env(base: str, token: str, **settings: str | int | float) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBQUEUE_")}
    env.update(JOBQUEUE_URL=base, JOBQUEUE_TOKEN=token)
    env.update({f"WORKER_{k.upper()}": str(v) for k, v in settings.items()})
    return env


async def test_the_committed_types_are_those_of_the_live_openapi_document(
    api: tuple[str, Process], built: Path, tmp_path: Path
) -> None:
    base, _ = api
    made = tmp_path / "schema.ts"
    run("node", "scripts/gen-types.mjs", base, "--out", str(made), timeout=120)
    committed = (built / "src" / "schema.ts").read_text()
    assert made.read_text() == committed, (
        "clients/typescript/src/schema.ts differs from the served /openapi.json: "
        "regenerate it with `npm run gen-types -- <url of a jobqueue api>`"
    )


async def test_the_clients_own_tests_pass(
    api: tuple[str, Process], built: Path, db: asyncpg.Connection, schema: str
) -> None:
    base, _ = api
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBQUEUE_")}
    env.update(
        JOBQUEUE_URL=base,
        JOBQUEUE_TOKEN=await make_token(db, schema, "ts-tests", WORK),
        JOBQUEUE_TOKEN_OTHER=await make_token(db, schema, "ts-tests-other", WORK),
        JOBQUEUE_TOKEN_READ=await make_token(db, schema, "ts-tests-reader", ["jobs:read"]),
    )
    tests = sorted(str(p.relative_to(built)) for p in (built / "build" / "test").glob("*.test.js"))
    assert tests, "no compiled tests"
    done = await asyncio.to_thread(
        subprocess.run,
        ["node", "--test", "--test-concurrency=1", *tests],
        cwd=built,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^# fail 0$", done.stdout, re.M), done.stdout
    assert re.search(r"^# pass [1-9]\d*$", done.stdout, re.M), done.stdout


JOBS = 2000


async def test_a_typescript_and_a_python_worker_drain_one_queue_each_job_once(
    api: tuple[str, Process],
    spawn: Spawn,
    env: dict[str, str],
    node: type[NodeProcess],
    db: asyncpg.Connection,
    schema: str,
) -> None:
    base, _ = api
    token = await make_token(db, schema, "ts-drain", WORK)
    python = spawn(["worker", "--app", "tally_app:jq", "--worker-count", "10"], env, "python")
    ts = node(WORKER_SCRIPT, ts_worker_env(base, token, name="ts-1", concurrency=50))
    python.wait_for_output("worker started")
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        await registered(client, token, "http:ts-drain:ts-1")
        started = time.monotonic()
        jobs = [{"type": "tally", "payload": {"n": n, "id": n}} for n in range(JOBS)]
        answer = await client.post("/jobs/batch", json={"jobs": jobs}, headers=auth(token))
        assert answer.status_code == 201, answer.text
        ids: list[int] = answer.json()["ids"]
        deadline = time.monotonic() + 180
        while (
            done := await db.fetchval(
                f"SELECT count(*) FROM \"{schema}\".jobs WHERE status = 'completed'"
            )
        ) < JOBS:
            assert time.monotonic() < deadline, f"only {done} of {JOBS} completed"
            assert ts.popen.poll() is None, ts.output
            assert python.popen.poll() is None, python.output
            await asyncio.sleep(0.1)
        drained = time.monotonic() - started
    assert ts.stop() == 0, ts.output
    assert python.stop() == 0

    rows = await db.fetch(
        f'SELECT id, status, attempts, payload, result FROM "{schema}".jobs ORDER BY id'
    )
    assert [r["id"] for r in rows] == ids
    assert {(r["status"], r["attempts"]) for r in rows} == {("completed", 1)}
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".job_attempts') == 0
    by_ts, by_python = set(), set()
    for r in rows:
        result, n = json.loads(r["result"]), json.loads(r["payload"])["id"]
        if result == {"by": "typescript", "worker": "ts-1", "id": n}:
            by_ts.add(n)
        else:
            assert result == {"counted": n}, result
            by_python.add(n)
    # The TypeScript worker's ledger: each job it ran, once, and only those.
    ran = [int(m[1]) for m in re.finditer(r"^ran \d+ (\d+)$", ts.output, re.M)]
    assert sorted(ran) == sorted(by_ts)
    assert by_ts, "the TypeScript worker ran none"
    assert by_python, "the Python worker ran none"
    assert by_ts | by_python == set(range(JOBS))
    stats = json.loads(ts.wait_for(r"^stats (.*)$")[1])
    assert (stats["completed"], stats["failed"], stats["lost"]) == (len(by_ts), 0, 0)
    print(
        f"\n{JOBS} jobs drained in {drained:.2f} s: {len(by_ts)} by the TypeScript worker, "
        f"{len(by_python)} by the Python worker"
    )


async def test_a_killed_typescript_workers_job_is_rescued_and_its_late_complete_refused(
    api: tuple[str, Process],
    spawn: Spawn,
    env: dict[str, str],
    node: type[NodeProcess],
    db: asyncpg.Connection,
    schema: str,
) -> None:
    base, _ = api
    token = await make_token(db, schema, "ts-killed", WORK)
    ts = node(WORKER_SCRIPT, ts_worker_env(base, token, name="ts-1", mode="block", lease_seconds=2))
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        await registered(client, token, "http:ts-killed:ts-1")
        answer = await client.post(
            "/jobs", json={"type": "tally", "payload": {"n": 7}}, headers=auth(token)
        )
        job_id = answer.json()["id"]
        started = ts.wait_for(rf"^started {job_id} (\S+)$")
        lease = started[1]
        ts.popen.kill()  # kill -9, mid-job
        ts.popen.wait()

        # A Python worker: its maintenance leader rescues the job once the lease ran
        # out, and its handler runs it.
        env["JOBQUEUE_RESCUE_INTERVAL"] = "0.5"
        python = spawn(["worker", "--app", "tally_app:jq"], env, "python")
        shown = (await client.get(f"/jobs/{job_id}?wait=60", headers=auth(token))).json()
        assert (shown["status"], shown["attempts"], shown["result"]) == (
            "completed", 2, {"counted": 7}
        )  # fmt: skip

        late = await client.post(
            f"/jobs/{job_id}/complete",
            json={"lease": lease, "result": "the killed worker's"},
            headers=auth(token),
        )
        assert late.status_code == 409, late.text
        assert "nothing changed" in late.json()["detail"]
        shown = (await client.get(f"/jobs/{job_id}", headers=auth(token))).json()
        assert (shown["status"], shown["result"]) == ("completed", {"counted": 7})
    assert python.stop() == 0


async def test_a_long_typescript_job_keeps_its_lease_by_its_heartbeats(
    api: tuple[str, Process],
    spawn: Spawn,
    env: dict[str, str],
    node: type[NodeProcess],
    db: asyncpg.Connection,
    schema: str,
) -> None:
    """A job running four times its lease is never rescued: the batched heartbeats
    renew it, under a rescuer that looks five times a second."""
    base, _ = api
    token = await make_token(db, schema, "ts-long", WORK)
    settings = {"name": "ts-1", "mode": "slow", "type": "slow", "lease_seconds": 1}
    ts = node(WORKER_SCRIPT, ts_worker_env(base, token, **settings))
    env["JOBQUEUE_RESCUE_INTERVAL"] = "0.2"
    python = spawn(["worker", "--app", "tally_app:jq"], env, "python")  # no handler for "slow"
    python.wait_for_output("worker started")
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        await registered(client, token, "http:ts-long:ts-1")
        answer = await client.post(
            "/jobs", json={"type": "slow", "payload": {"ms": 4000, "id": 1}}, headers=auth(token)
        )
        job_id = answer.json()["id"]
        shown = (await client.get(f"/jobs/{job_id}?wait=60", headers=auth(token))).json()
        assert (shown["status"], shown["attempts"], shown["result"]) == (
            "completed", 1, {"by": "typescript", "worker": "ts-1", "id": 1}
        )  # fmt: skip
    assert ts.stop() == 0, ts.output
    assert python.stop() == 0
    assert "job.rescued" not in python.output, python.output


async def test_a_cancel_reaches_a_running_typescript_handlers_signal(
    api: tuple[str, Process],
    node: type[NodeProcess],
    db: asyncpg.Connection,
    schema: str,
) -> None:
    base, _ = api
    token = await make_token(db, schema, "ts-cancel", WORK)
    lease_seconds = 6  # a heartbeat every 2 s
    ts = node(
        WORKER_SCRIPT,
        ts_worker_env(base, token, name="ts-1", mode="cancel", lease_seconds=lease_seconds),
    )
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        await registered(client, token, "http:ts-cancel:ts-1")
        answer = await client.post("/jobs", json={"type": "tally"}, headers=auth(token))
        job_id = answer.json()["id"]
        ts.wait_for(rf"^started {job_id} ")
        asked = await client.post(f"/jobs/{job_id}/cancel", headers=auth(token))
        assert asked.status_code == 202, asked.text
        cancelled_at = time.monotonic()
        # Seen by the next heartbeat: within one interval, three allowed for a slow machine.
        ts.wait_for(rf"^aborted {job_id} JobCancelledError$", timeout=lease_seconds)
        seen_after = time.monotonic() - cancelled_at
        shown = (await client.get(f"/jobs/{job_id}?wait=30", headers=auth(token))).json()
        assert (shown["status"], shown["attempts"]) == ("cancelled", 1)
    assert ts.stop() == 0, ts.output
    print(f"\nthe cancel reached the handler {seen_after:.2f} s after it was asked")
