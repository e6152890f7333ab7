"""The Go client (clients/go) against a real `jobqueue api` process: `go vet` and
`go test` pass, its integration tests included (enqueue, wait, claim and complete,
failures retried and discarded, a job released and one handed back at shutdown,
pending again with its attempt not counted, every refusal a typed error); a Go worker
of 50 slots and a Python worker drain 2,000 jobs of one queue together, each job run
and completed exactly once; a cancel request reaches a running Go handler's ctx at the
next heartbeat; and a Go worker killed mid-job loses the job to another worker once
its lease ran out, its late write refused with 409."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.acceptance import http_worker_support as support
from tests.acceptance.http_worker_support import auth
from tests.acceptance.test_auth import make_token
from tests.conftest import ROOT, Process, Spawn

pytestmark = pytest.mark.anyio

GO_CLIENT = ROOT / "clients" / "go"
WORK = ["jobs:work", "jobs:enqueue", "jobs:read", "payloads:read", "jobs:control", "jobs:signal"]

# The Python worker's application: a handler that records each run in a ledger file
# and names itself in its result, as the Go worker's does.
PYTHON_APP = """
import os
from typing import Any

from jobqueue import JobContext, JobQueue

jq = JobQueue()


@jq.task("mark")
async def mark(payload: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    with open(os.environ["LEDGER_FILE"], "a") as ledger:
        ledger.write(f"{ctx.id} {ctx.attempt} python\\n")
    return {"worker": "python", "id": ctx.id, "attempt": ctx.attempt}
"""


@pytest.fixture(scope="session")
def go_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of the go commands: caches in temporary directories, nothing
    downloaded, neither modules nor a toolchain."""
    go = shutil.which("go")
    assert go is not None, "the Go client's tests need Go: apt-get install golang-go"
    home = tmp_path_factory.mktemp("go")
    return {
        **os.environ,
        "GOCACHE": str(home / "cache"),
        "GOPATH": str(home / "path"),
        "GOTOOLCHAIN": "local",
        "GOPROXY": "off",
        "GOFLAGS": "",
        "GOWORK": "off",
        "GO111MODULE": "on",
        "GOTELEMETRY": "off",
        "CGO_ENABLED": "0",
    }


def go(
    go_env: dict[str, str], *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["go", *args],
        cwd=GO_CLIENT,
        env=go_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def gofmt() -> subprocess.CompletedProcess[str]:
    """The files of the Go client that gofmt would change, if any."""
    return subprocess.run(
        ["gofmt", "-l", "."], cwd=GO_CLIENT, capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="session")
def go_worker(go_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go worker of clients/go/cmd/worker, built once."""
    binary = tmp_path_factory.mktemp("go-bin") / "jobqueue-go-worker"
    built = go(go_env, "build", "-o", str(binary), "./cmd/worker")
    assert built.returncode == 0, built.stdout + built.stderr
    return binary


class GoProcess:
    """A Go worker running as a subprocess, its output in a file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log_path = log
        self._log = log.open("wb")
        self.popen = subprocess.Popen(args, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    @property
    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """The first match of ``pattern`` in the output, once printed."""
        deadline = time.monotonic() + timeout
        while (found := re.search(pattern, self.output)) is None:
            if self.popen.poll() is not None:
                raise AssertionError(f"exited before printing {pattern!r}:\n{self.output}")
            assert time.monotonic() < deadline, f"{pattern!r} not printed:\n{self.output}"
            time.sleep(0.05)
        return found

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, and its exit code once it drained."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        code = self.popen.wait(timeout)
        self._log.close()
        return code

    def close(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
        self._log.close()


# (url, token, name, *flags) -> the Go worker started
GoSpawn = Callable[..., GoProcess]


@pytest.fixture
def go_spawn(go_worker: Path, tmp_path: Path) -> Iterator[GoSpawn]:
    """Start Go workers against ``url`` with ``token``; any left are killed at the end."""
    started: list[GoProcess] = []

    def start(url: str, token: str, name: str, *flags: str) -> GoProcess:
        env = {**os.environ, "JOBQUEUE_URL": url, "JOBQUEUE_TOKEN": token}
        args = [str(go_worker), "-name", name, *flags]
        proc = GoProcess(args, env, tmp_path / f"{name}.log")
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.close()


api = support.api  # a fixture


def python_worker(
    spawn: Spawn, env: dict[str, str], tmp_path: Path, queue: str, **settings: str
) -> tuple[Process, Path]:
    """A `jobqueue worker` running PYTHON_APP on ``queue``, and its ledger file."""
    (tmp_path / "go_client_app.py").write_text(PYTHON_APP)
    ledger = tmp_path / "python.ledger"
    worker_env = {
        **env,
        **settings,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}",
        "LEDGER_FILE": str(ledger),
        "JOBQUEUE_LOG_LEVEL": "info",
    }
    args = ["worker", "--app", "go_client_app:jq", "--queue", queue, "--worker-count", "10"]
    worker = spawn(args, worker_env, name="python-worker")
    worker.wait_for_output("worker started")
    return worker, ledger


async def final(client: httpx.AsyncClient, token: str, job_id: int, timeout: float = 60) -> Any:
    """The job once ended, by GET /jobs/{id}?wait= until a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        answer = await client.get(f"/jobs/{job_id}", params={"wait": 5}, headers=auth(token))
        assert answer.status_code == 200, answer.text
        job = answer.json()
        if job["status"] in ("completed", "failed", "cancelled"):
            return job
        assert time.monotonic() < deadline, f"job {job_id} not ended: {job}"


async def test_go_vet_and_go_test_pass_against_the_live_server(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str, go_env: dict[str, str]
) -> None:
    base, server = api
    token = await make_token(db, schema, "go-client", WORK)
    reader = await make_token(db, schema, "go-reader", ["jobs:read"])
    env = {
        **go_env,
        "JOBQUEUE_URL": base,
        "JOBQUEUE_TOKEN": token,
        "JOBQUEUE_READ_TOKEN": reader,
    }
    formatted = await asyncio.to_thread(gofmt)
    assert (formatted.returncode, formatted.stdout) == (0, ""), formatted.stderr
    vet = await asyncio.to_thread(go, env, "vet", "./...")
    assert vet.returncode == 0, vet.stdout + vet.stderr
    tested = await asyncio.to_thread(go, env, "test", "-count=1", "-v", "./...")
    output = tested.stdout + tested.stderr
    assert tested.returncode == 0, output + server.output[-5000:]
    # The integration tests ran, none skipped: the server's URL and tokens were given.
    assert "--- SKIP" not in output, output
    passed = set(re.findall(r"--- PASS: (TestLive\w+)", output))
    assert passed == {
        "TestLiveEnqueueGetAndIdempotency",
        "TestLiveAWorkerCompletesAJobAndWaitSeesItsResult",
        "TestLiveAFailedAttemptIsRetriedAndADiscardedJobFailsForGood",
        "TestLiveACancelRequestCancelsTheHandlersContext",
        "TestLiveRefusalsAreTypedErrorsWithTheServersMessage",
        "TestLiveAReleasedJobIsPendingAgainItsAttemptNotCounted",
        "TestLiveAWorkerStoppingHandsBackTheJobsItsShutdownInterrupted",
        "TestLiveASnoozedJobRunsAgainLaterItsAttemptNotCounted",
    }, output


JOBS = 2000


async def test_a_go_worker_and_a_python_worker_drain_2000_jobs_each_run_once(
    api: tuple[str, Process],
    db: asyncpg.Connection,
    schema: str,
    spawn: Spawn,
    env: dict[str, str],
    go_spawn: GoSpawn,
    tmp_path: Path,
) -> None:
    base, _ = api
    token = await make_token(db, schema, "go-drain", WORK)
    python, python_ledger = python_worker(spawn, env, tmp_path, "drain")
    go_ledger = tmp_path / "go.ledger"
    go_worker = go_spawn(
        base, token, "go-drain", "-queue", "drain", "-type", "mark", "-concurrency", "50",
        "-ledger", str(go_ledger),
    )  # fmt: skip
    go_worker.wait_for("worker go-drain started")

    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        started = time.monotonic()
        jobs = [{"type": "mark", "queue": "drain", "payload": {"n": n}} for n in range(JOBS)]
        answer = await client.post("/jobs/batch", json={"jobs": jobs}, headers=auth(token))
        assert answer.status_code == 201, answer.text
        ids = answer.json()["ids"]
        deadline = time.monotonic() + 180
        while (
            done := await db.fetchval(
                f"SELECT count(*) FROM \"{schema}\".jobs WHERE status = 'completed'"
            )
        ) < JOBS:
            assert time.monotonic() < deadline, f"only {done} of {JOBS} completed"
            assert python.popen.poll() is None, python.output[-5000:]
            assert go_worker.popen.poll() is None, go_worker.output[-5000:]
            await asyncio.sleep(0.05)
        seconds = time.monotonic() - started
    assert go_worker.stop() == 0, go_worker.output[-5000:]
    assert python.stop() == 0, python.output[-5000:]

    # The ledger: each job ran once, by the worker its result names, at its first attempt.
    runs = [
        line.split()
        for path in (go_ledger, python_ledger)
        for line in path.read_text().splitlines()
    ]
    assert collections.Counter(int(job_id) for job_id, _, _ in runs) == dict.fromkeys(ids, 1)
    ran_by = {int(job_id): who for job_id, _, who in runs}
    rows = await db.fetch(f'SELECT id, status, attempts, result FROM "{schema}".jobs')
    assert len(rows) == JOBS
    for row in rows:
        result = json.loads(row["result"])
        assert (row["status"], row["attempts"]) == ("completed", 1), dict(row)
        assert (result["worker"], result["attempt"]) == (ran_by[row["id"]], 1), dict(row)
    by_worker = collections.Counter(ran_by.values())
    assert set(by_worker) == {"go-drain", "python"}, by_worker
    stats = json.loads(go_worker.wait_for(r"stats (\{.*\})")[1])
    assert (stats["completed"], stats["lost"]) == (by_worker["go-drain"], 0), stats
    print(
        f"\n{JOBS} jobs drained in {seconds:.2f}s: {by_worker['go-drain']} by the Go worker "
        f"(50 slots), {by_worker['python']} by the Python worker (10 slots)"
    )


async def test_a_cancel_request_reaches_a_running_go_handlers_context(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str, go_spawn: GoSpawn
) -> None:
    base, _ = api
    token = await make_token(db, schema, "go-cancel", WORK)
    lease = 3  # a heartbeat every second
    worker = go_spawn(
        base, token, "go-cancel", "-queue", "cancel", "-type", "long", "-mode", "block",
        "-lease", str(lease),
    )  # fmt: skip
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        answer = await client.post(
            "/jobs", json={"type": "long", "queue": "cancel"}, headers=auth(token)
        )
        job_id = answer.json()["id"]
        worker.wait_for(rf"running job={job_id} ")
        asked = time.monotonic()
        cancel = await client.post(f"/jobs/{job_id}/cancel", headers=auth(token))
        assert cancel.status_code == 202, cancel.text
        job = await final(client, token, job_id)
        seconds = time.monotonic() - asked
    # The handler returned ctx.Err() once a heartbeat saw the request: the job ended
    # cancelled, never retried, long before its lease could matter.
    assert (job["status"], job["attempts"]) == ("cancelled", 1), job
    assert seconds < 5 * lease, seconds
    assert worker.popen.poll() is None, worker.output
    assert worker.stop() == 0, worker.output
    stats = json.loads(worker.wait_for(r"stats (\{.*\})")[1])
    assert (stats["claimed"], stats["cancelled"]) == (1, 1), stats
    print(f"\ncancelled {seconds:.2f}s after the request (a heartbeat every {lease / 3:.2f}s)")


async def test_a_killed_go_workers_job_is_rescued_and_its_late_complete_refused(
    api: tuple[str, Process],
    db: asyncpg.Connection,
    schema: str,
    spawn: Spawn,
    env: dict[str, str],
    go_spawn: GoSpawn,
    tmp_path: Path,
) -> None:
    base, _ = api
    token = await make_token(db, schema, "go-rescue", WORK)
    # The maintenance leader that rescues expired leases; it serves another queue.
    python_worker(spawn, env, tmp_path, "elsewhere", JOBQUEUE_RESCUE_INTERVAL="0.5")
    flags = ["-queue", "rescue", "-type", "hold", "-lease", "2"]
    first = go_spawn(base, token, "go-first", *flags, "-mode", "block")
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        answer = await client.post(
            "/jobs", json={"type": "hold", "queue": "rescue"}, headers=auth(token)
        )
        job_id = answer.json()["id"]
        running = first.wait_for(rf"running job={job_id} attempt=1 lease=(\S+)")
        stale_lease = running[1]
        first.popen.kill()  # SIGKILL: no drain, no outcome, no more heartbeats
        first.popen.wait()

        second = go_spawn(base, token, "go-second", *flags)
        job = await final(client, token, job_id)
        assert (job["status"], job["attempts"]) == ("completed", 2), job
        assert job["result"] == {"worker": "go-second", "id": job_id, "attempt": 2}

        late = await client.post(
            f"/jobs/{job_id}/complete",
            json={"lease": stale_lease, "result": {"worker": "go-first"}},
            headers=auth(token),
        )
        assert late.status_code == 409, late.text
        assert "nothing changed" in late.json()["detail"]
        shown = (await client.get(f"/jobs/{job_id}", headers=auth(token))).json()
        assert shown["result"] == {"worker": "go-second", "id": job_id, "attempt": 2}
        attempts = (await client.get(f"/jobs/{job_id}/attempts", headers=auth(token))).json()
        assert [a["error"] for a in attempts["attempts"] if a["error"]] == [
            "worker lost (lease expired)"
        ], attempts
    assert second.stop() == 0, second.output
