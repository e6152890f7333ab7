"""The upgrade rule (CHANGELOG.md): the processes of the previous release keep working
while this release's migrations are applied, and beside this release's processes.

The previous release is the newest `v*` tag before this commit, its code taken from
this repository's history (`git archive`) and run on this checkout's dependencies
(PYTHONPATH first): a release that changed its dependencies would need a virtualenv of
its own. Until a release is tagged before this commit, the previous release is this
commit itself."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.apps.ledger_app import LEDGER_TABLE
from tests.conftest import Process, Spawn, fetch, free_port, jobqueue

ROOT = Path(__file__).resolve().parents[2]


def previous_release() -> str:
    """The newest release tag reachable from HEAD that is not HEAD's own; else HEAD."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,
                              text=True, check=True).stdout.strip()  # fmt: skip

    head = git("rev-parse", "HEAD")
    for tag in git("tag", "--merged", "HEAD", "--list", "v*", "--sort=-v:refname").split():
        if git("rev-list", "-n", "1", tag) != head:
            return tag
    return head


def checked_out(revision: str, into: Path) -> Path:
    """``revision``'s src/ under ``into``."""
    archive = into / "previous.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "-C", str(ROOT), "archive", revision, "src"], stdout=out,
                       check=True)  # fmt: skip
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


class Load(threading.Thread):
    """Enqueues a job every 10 ms through each API in ``bases`` in turn, until stopped;
    the ids it got, by which API."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.bases: list[tuple[str, str]] = []
        self.ids: dict[int, str] = {}
        self.refused: list[str] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        n = 0
        with httpx.Client(timeout=10) as client:
            while not self.stopped.is_set():
                name, base = self.bases[n % len(self.bases)]
                answer = client.post(f"{base}/jobs", json={"type": "record"})
                if answer.status_code != 201:
                    self.refused.append(f"{name}: {answer.status_code} {answer.text}")
                else:
                    self.ids[answer.json()["id"]] = name
                n += 1
                time.sleep(0.01)


@pytest.mark.upgrade
@pytest.mark.slow
def test_the_previous_release_keeps_working_through_the_upgrade(
    pg_dsn: str, env: dict[str, str], spawn: Spawn, tmp_path: Path
) -> None:
    previous = checked_out(previous_release(), tmp_path)
    schema = f"t_up_{uuid.uuid4().hex[:10]}"
    new_env = {**env, "JOBQUEUE_SCHEMA": schema}
    old_env = {**new_env, "PYTHONPATH": f"{previous}{os.pathsep}{env['PYTHONPATH']}"}
    where = subprocess.run([sys.executable, "-c", "import jobqueue; print(jobqueue.__file__)"],
                           env=old_env, capture_output=True, text=True, check=True)  # fmt: skip
    assert where.stdout.startswith(str(previous)), where.stdout  # the old code runs there
    try:
        run_the_upgrade(pg_dsn, schema, old_env, new_env, spawn)
    finally:
        fetch(pg_dsn, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run_the_upgrade(
    dsn: str, schema: str, old_env: dict[str, str], new_env: dict[str, str], spawn: Spawn
) -> None:
    migrated = jobqueue(old_env, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    fetch(dsn, f'CREATE TABLE "{schema}".ledger {LEDGER_TABLE}')
    old_base, old_api = start_api(spawn, old_env, "old-api")
    old_worker = spawn(["worker", "--app", "ledger_app:jq"], old_env, name="old-worker")

    load = Load()
    load.bases.append(("old", old_base))
    load.start()
    until("the previous release alone, under load", lambda: len(load.ids) >= 50)
    migrated = jobqueue(new_env, "migrate")  # this release's migrations, under load
    assert migrated.returncode == 0, migrated.stderr
    new_base, _ = start_api(spawn, new_env, "new-api")
    new_worker = spawn(["worker", "--app", "ledger_app:jq"], new_env, name="new-worker")
    before_both = max(load.ids, default=0)
    load.bases.append(("new", new_base))
    runner = {old_worker.popen.pid: "old", new_worker.popen.pid: "new"}

    def side_by_side() -> set[tuple[str, str]]:
        """(enqueued through, run by) of the jobs enqueued once both releases ran."""
        runs = fetch(dsn, f'SELECT job_id, pid FROM "{schema}".ledger WHERE job_id > $1',
                     before_both)  # fmt: skip
        return {(load.ids[r["job_id"]], runner[r["pid"]]) for r in runs if r["job_id"] in load.ids}

    every = {("old", "old"), ("old", "new"), ("new", "old"), ("new", "new")}
    until("jobs of either API run by either worker", lambda: side_by_side() == every)
    load.stopped.set()
    load.join(10)
    assert load.refused == []

    deadline = time.monotonic() + 60
    while fetch(dsn, f"""SELECT 1 FROM "{schema}".jobs WHERE status <> 'completed' LIMIT 1"""):
        assert time.monotonic() < deadline, "jobs left unfinished"
        time.sleep(0.2)
    runs = fetch(dsn, f'SELECT job_id, pid FROM "{schema}".ledger')
    # Every job enqueued ran exactly once.
    assert Counter(r["job_id"] for r in runs) == Counter(list(load.ids))
    # Jobs enqueued through either release's API were run by either release's worker.
    assert side_by_side() == every
    for process in (old_api, old_worker):  # no old process logged an error
        process.stop()
        assert "Traceback" not in process.output, process.output[-5000:]
        assert "[error" not in process.output, process.output[-5000:]


def until(what: str, check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        time.sleep(0.05)


def start_api(spawn: Spawn, env: dict[str, str], name: str) -> tuple[str, Process]:
    port = free_port()
    api = spawn(["api"], {**env, "PORT": str(port)}, name=name)
    base = f"http://127.0.0.1:{port}"
    api.wait_http(base)
    return base, api
