"""`jobqueue serve` with no DATABASE_URL: the embedded PostgreSQL starts, serves, and no
server process outlives jobqueue, whether it is stopped by SIGTERM or killed by SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port

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
