"""`jobqueue serve` with no DATABASE_URL: the embedded PostgreSQL starts, serves, and no
server process outlives jobqueue, whether it is stopped by SIGTERM or killed by SIGKILL;
a worker that joined it keeps working when `serve` restarts."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from tests.conftest import Process, Spawn, free_port

# A user namespace where this process is uid 65534: an unprivileged user, with no
# capabilities, that can still read the root-owned virtualenv.
AS_NORMAL_USER = ["unshare", "--user", "--map-user=65534", "--map-group=65534", "--"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def users() -> list[str]:
    return ["root", "normal user"] if os.geteuid() == 0 else ["normal user"]


@pytest.mark.parametrize("user", users())
@pytest.mark.parametrize("ending", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_serve_on_the_embedded_default(tmp_path: Path, user: str, ending: signal.Signals) -> None:
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "JOBQUEUE_TEST_DATABASE_URL", "JOBQUEUE_SCHEMA")
    }
    env.update(PORT=str(port), JOBQUEUE_DATA_DIR=str(tmp_path / "data"))
    prefix = AS_NORMAL_USER if user == "normal user" and os.geteuid() == 0 else []
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-m", "jobqueue", "serve"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    postmaster = 0
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.1)
        postmaster = int((tmp_path / "data/pgdata/postmaster.pid").read_text().split()[0])
        assert alive(postmaster)

        job = httpx.post(f"{base}/jobs", json={"type": "noop"}).json()
        while (status := httpx.get(f"{base}/jobs/{job['id']}").json()["status"]) != "completed":
            assert status in ("pending", "running")
            assert time.monotonic() < deadline
            time.sleep(0.05)

        proc.send_signal(ending)
        code = proc.wait(30)
        assert code == (0 if ending == signal.SIGTERM else -signal.SIGKILL)
        deadline = time.monotonic() + 15
        while alive(postmaster):
            assert time.monotonic() < deadline, "PostgreSQL outlived jobqueue"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if postmaster and alive(postmaster):
            os.kill(postmaster, signal.SIGQUIT)
        log.close()


@pytest.mark.parametrize(
    "processes",
    [pytest.param(1, id="worker"), pytest.param(2, id="processes", marks=pytest.mark.slow)],
)
def test_a_joined_worker_finds_the_server_again_when_serve_restarts(
    tmp_path: Path, spawn: Spawn, processes: int
) -> None:
    """`jobqueue serve`, then `jobqueue worker` in the same directory, which joins the
    embedded server serve started (with `--processes 2`, each worker process joins it).
    serve restarts, and its server with it: on the same port, which is still free; then
    again while another program holds that port, so on another one. Each time the
    workers run the jobs enqueued after the restart."""
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "JOBQUEUE_TEST_DATABASE_URL", "JOBQUEUE_SCHEMA")
    }
    env.update(PORT=str(port), JOBQUEUE_DATA_DIR=str(tmp_path / "data"))
    base = f"http://127.0.0.1:{port}"
    pidfile = tmp_path / "data/pgdata/postmaster.pid"

    def start_serve(name: str) -> tuple[Process, int]:
        """serve, started and answering; and its PostgreSQL's port."""
        serve = spawn(["serve"], env, name)
        serve.wait_http(base, timeout=60)
        return serve, int(pidfile.read_text().splitlines()[3])

    def run_on_the_worker() -> None:
        # serve's own workers serve the queue "default" only: this job is the worker's.
        job = httpx.post(f"{base}/jobs", json={"type": "noop", "queue": "joined"}).json()
        deadline = time.monotonic() + 60
        while (status := httpx.get(f"{base}/jobs/{job['id']}").json()["status"]) != "completed":
            assert status in ("pending", "running"), status
            assert time.monotonic() < deadline, f"job {job['id']} never ran:\n{worker.output}"
            time.sleep(0.1)

    def every_worker_beats_after(restarted: datetime) -> None:
        """Each worker process has written its heartbeat since serve restarted: a
        worker left behind on the old port never does again."""
        deadline = time.monotonic() + 60
        while True:
            workers = [w for w in httpx.get(f"{base}/workers").json() if "joined" in w["queues"]]
            beats = [datetime.fromisoformat(w["heartbeat_at"]) for w in workers]
            if len(beats) == processes and min(beats) > restarted:
                return
            assert time.monotonic() < deadline, f"{workers}\n{worker.output}"
            time.sleep(0.1)

    serve, first_port = start_serve("serve")
    # A heartbeat a second (a third of the lease), for every_worker_beats_after.
    worker_env = env | {"JOBQUEUE_LEASE_SECONDS": "3"}
    worker = spawn(
        ["worker", "--queue", "joined", "--processes", str(processes)], worker_env, "worker"
    )
    worker.wait_for_output("worker started", timeout=60)
    run_on_the_worker()

    assert serve.stop() == 0
    serve, again = start_serve("serve-again")
    assert again == first_port
    every_worker_beats_after(datetime.now(UTC))
    run_on_the_worker()

    assert serve.stop() == 0
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", first_port))
        taken.listen()
        serve, other = start_serve("serve-elsewhere")
        assert other != first_port
        every_worker_beats_after(datetime.now(UTC))
        run_on_the_worker()
    assert worker.popen.poll() is None, worker.output
