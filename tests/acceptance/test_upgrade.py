"""The upgrade rule (CHANGELOG.md): the processes of the previous release keep working
while this release's migrations are applied, and beside this release's processes.

The previous release is the newest `v*` tag before this commit, or where the clone
has no tags, the commit CHANGELOG.md says it was tagged at. It is installed from a
git worktree at that tag into a virtualenv of its own, as a user's deployment holds it:
its own package, version and metadata. Nothing is fetched to build it: the build uses
this checkout's setuptools (the dev extra) and the release runs on this checkout's
dependencies, which that virtualenv sees through a .pth file; a release that changed its
dependencies would need them installed there instead. With no release before this
commit, the previous release is this commit itself."""

from __future__ import annotations

import re
import site
import subprocess
import sys
import threading
import time
import uuid
import venv
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.apps.ledger_app import LEDGER_TABLE
from tests.conftest import Process, Spawn, fetch, free_port, jobqueue

ROOT = Path(__file__).resolve().parents[2]


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def previous_release() -> str:
    """The newest release before HEAD: its tag, or, in a clone that did not bring the
    tags along, the commit CHANGELOG.md names for it ("tagged `v0.1.0` at commit
    `daa43c5`"); HEAD itself if there is none."""
    head = git("rev-parse", "HEAD")
    for tag in git("tag", "--merged", "HEAD", "--list", "v*", "--sort=-v:refname").split():
        if git("rev-list", "-n", "1", tag) != head:
            return tag
    for commit in RELEASED.findall((ROOT / "CHANGELOG.md").read_text(encoding="utf-8")):
        ancestor = ["git", "-C", str(ROOT), "merge-base", "--is-ancestor", commit, "HEAD"]
        found = subprocess.run(ancestor, capture_output=True).returncode == 0
        if found and git("rev-parse", commit) != head:
            return commit
    return head


# A release's section in CHANGELOG.md, newest first, names the commit it was tagged at.
RELEASED = re.compile(r"tagged `v[0-9][^`]*` at commit `([0-9a-f]{7,40})`")


def installed(revision: str, into: Path) -> str:
    """The python of a new virtualenv under ``into`` holding ``revision``'s jobqueue,
    installed from a git worktree at it (removed once installed)."""
    tree, env = into / "release", into / "venv"
    venv.create(env, with_pip=False)
    python = str(env / "bin" / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # After its own site-packages: the release's jobqueue comes first.
    Path(purelib, "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    git("worktree", "add", "--detach", str(tree), revision)
    try:
        subprocess.run(
            [sys.executable, "-m", "pip", "--python", python, "install", "--quiet",
             "--no-deps", "--no-build-isolation", "--no-index", str(tree)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
    finally:
        git("worktree", "remove", "--force", str(tree))
    return python


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
    release = previous_release()
    old = installed(release, tmp_path)
    where = subprocess.run([old, "-c", "import jobqueue; print(jobqueue.__file__)"],
                           env=env, capture_output=True, text=True, check=True)  # fmt: skip
    # The old code runs from its own virtualenv, not from this checkout.
    assert where.stdout.startswith(str(tmp_path / "venv")), where.stdout
    version = jobqueue(env, "--version", python=old)
    assert version.returncode == 0, version.stderr
    print(f"previous release: {release}, {version.stdout.strip()}")
    schema = f"t_up_{uuid.uuid4().hex[:10]}"
    new_env = {**env, "JOBQUEUE_SCHEMA": schema}
    try:
        run_the_upgrade(pg_dsn, schema, old, new_env, spawn)
    finally:
        fetch(pg_dsn, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run_the_upgrade(dsn: str, schema: str, old: str, env: dict[str, str], spawn: Spawn) -> None:
    """``old``: the previous release's python; ``env``: both releases' environment."""
    migrated = jobqueue(env, "migrate", python=old)
    assert migrated.returncode == 0, migrated.stderr
    fetch(dsn, f'CREATE TABLE "{schema}".ledger {LEDGER_TABLE}')
    old_base, old_api = start_api(spawn, env, "old-api", python=old)
    old_worker = spawn(["worker", "--app", "ledger_app:jq"], env, name="old-worker",
                       python=old)  # fmt: skip

    load = Load()
    load.bases.append(("old", old_base))
    load.start()
    until("the previous release alone, under load", lambda: len(load.ids) >= 50)
    migrated = jobqueue(env, "migrate")  # this release's migrations, under load
    assert migrated.returncode == 0, migrated.stderr
    new_base, _ = start_api(spawn, env, "new-api")
    new_worker = spawn(["worker", "--app", "ledger_app:jq"], env, name="new-worker")
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
    # A refusal's cause is in its API's log (an old API's 500 was seen once in CI,
    # 2026-12-07, and not again in six runs).
    assert load.refused == [], (old_api.output[-6000:], load.refused)

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


def start_api(
    spawn: Spawn, env: dict[str, str], name: str, python: str = sys.executable
) -> tuple[str, Process]:
    port = free_port()
    api = spawn(["api"], {**env, "PORT": str(port)}, name=name, python=python)
    base = f"http://127.0.0.1:{port}"
    api.wait_http(base)
    return base, api
