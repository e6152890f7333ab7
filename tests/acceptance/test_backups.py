"""docs/backups.md, checked: a schema dumped with pg_dump while it holds pending,
running, scheduled, waiting-to-retry and workflow jobs, a schedule, a unique key and
an idempotency key, restored into a new database, and served there. Every job that
had not completed at the dump completes once, the workflow finishes, the schedule
ticks again, and the keys answer as they did."""

from __future__ import annotations

import subprocess
import time
import urllib.parse
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from jobqueue.db.embedded import wheel_bin_dir
from tests.apps.ledger_app import LEDGER_TABLE
from tests.conftest import Spawn, fetch, free_port

# Seconds: long enough that the dump comes first on a loaded machine, short enough
# to wait for after the restore.
SCHEDULED_IN = 8
RETRY_IN = 6


def tools_for(dsn: str) -> Path:
    """The folder of pg_dump and pg_restore of the server's major version: a newer
    pg_restore sets parameters an older server does not know (transaction_timeout)."""
    major = int(fetch(dsn, "SHOW server_version_num")[0][0]) // 10000
    for folder in (wheel_bin_dir(), Path(f"/usr/lib/postgresql/{major}/bin")):
        if not folder.is_dir():
            continue
        command = [str(folder / "pg_restore"), "--version"]
        version = subprocess.run(command, capture_output=True, text=True, check=False).stdout
        if f" {major}." in version:
            return folder
    raise AssertionError(f"no pg_restore of PostgreSQL {major} here")


def run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def in_database(dsn: str, database: str) -> str:
    return urllib.parse.urlunsplit(urllib.parse.urlsplit(dsn)._replace(path=f"/{database}"))


def until(what: str, check: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        time.sleep(0.1)
    return found


def status(base: str, job_id: int) -> dict[str, Any]:
    job: dict[str, Any] = httpx.get(f"{base}/jobs/{job_id}").json()
    return job


def post(base: str, path: str, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    answer = httpx.post(f"{base}{path}", json=body, headers=headers)
    assert answer.status_code in (200, 201), answer.text
    created: dict[str, Any] = answer.json()
    return created


@pytest.fixture
def restored_database(pg_dsn: str) -> Any:
    """The name of a database to restore into, dropped afterwards."""
    name = f"restored_{uuid.uuid4().hex[:10]}"
    yield name
    fetch(pg_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.upgrade
def test_a_restored_backup_runs_every_unfinished_job_once(
    pg_dsn: str,
    schema: str,
    env: dict[str, str],
    spawn: Spawn,
    tmp_path: Path,
    restored_database: str,
) -> None:
    fetch(pg_dsn, f'CREATE TABLE "{schema}".ledger {LEDGER_TABLE}')
    # Leases of 2 s, so that the restored server rescues the job killed mid-run soon.
    env = {**env, "JOBQUEUE_LEASE_SECONDS": "2", "JOBQUEUE_RESCUE_INTERVAL": "0.5"}
    base = f"http://127.0.0.1:{env['PORT']}"
    api = spawn(["api"], env, name="api")
    api.wait_http(base)
    worker = spawn(["worker", "--app", "backup_app:before"], env, name="worker")

    # What the backup holds. `before` has no handler for `finish`: such jobs wait.
    done = post(base, "/jobs", {"type": "record", "payload": {"n": "done"}})["id"]
    held = post(base, "/jobs", {"type": "hold"})["id"]
    flaky = post(base, "/jobs", {"type": "flaky", "payload": {"retry_in": RETRY_IN}})["id"]
    chain = [
        {"ref": "first", "type": "record"},
        {"ref": "second", "type": "finish", "depends_on": ["first"]},
        {"ref": "third", "type": "record", "depends_on": ["second"]},
    ]
    workflow = post(base, "/workflows", {"name": "restore-me", "jobs": chain})
    pending = post(base, "/jobs", {"type": "finish", "payload": {"n": "pending"}})["id"]
    scheduled = post(
        base, "/jobs", {"type": "record", "payload": {"n": "later"}, "delay_seconds": SCHEDULED_IN}
    )["id"]
    unique = {"type": "finish", "unique_key": "once", "unique_for": 3600}
    keyed = post(base, "/jobs", unique)["id"]
    idempotent_body = {"type": "finish", "payload": {"n": "idempotent"}}
    idempotent = post(base, "/jobs", idempotent_body, **{"Idempotency-Key": "order-7"})["id"]
    post(base, "/schedules", {"name": "ticks", "type": "record", "every": "1s",
                              "payload": {"tick": True}})  # fmt: skip

    until("the first job done", lambda: status(base, done)["status"] == "completed")
    until("the held job running", lambda: status(base, held)["status"] == "running")
    until("the flaky job waiting to retry", lambda: status(base, flaky)["attempts"] == 1
          and status(base, flaky)["status"] == "pending")  # fmt: skip
    until("the workflow at its second step", lambda: workflow_at_second(base, workflow["id"]))
    until("a tick", lambda: fetch(pg_dsn, f"""SELECT 1 FROM "{schema}".jobs
                                             WHERE payload = '{{"tick": true}}'"""))  # fmt: skip
    worker.popen.kill()  # mid-run: the held job stays running, its lease to run out
    worker.popen.wait()
    api.stop()

    at_dump = {r["id"]: r for r in fetch(pg_dsn, f'SELECT * FROM "{schema}".jobs')}
    assert at_dump[held]["status"] == "running"
    assert at_dump[flaky]["status"] == "pending"
    assert at_dump[flaky]["attempts"] == 1
    assert at_dump[scheduled]["run_at"] > fetch(pg_dsn, "SELECT now()")[0][0]
    unfinished = {i for i, r in at_dump.items() if r["status"] != "completed"}
    assert {held, flaky, pending, scheduled, keyed, idempotent} <= unfinished
    ledger_at_dump = Counter(
        (r["job_id"], r["attempt"]) for r in fetch(pg_dsn, f'SELECT * FROM "{schema}".ledger')
    )

    # The backup, and its restore into a new database, as docs/backups.md says.
    dump = tmp_path / "jobqueue.dump"
    tools = tools_for(pg_dsn)
    pg_dump = [str(tools / "pg_dump"), "--format=custom", f"--schema={schema}",
               f"--file={dump}", f"--dbname={pg_dsn}"]  # fmt: skip
    run(pg_dump)
    fetch(pg_dsn, f'CREATE DATABASE "{restored_database}"')
    restored = in_database(pg_dsn, restored_database)
    pg_restore = [str(tools / "pg_restore"), f"--dbname={restored}", str(dump)]
    run(pg_restore)

    port = free_port()
    served = {**env, "DATABASE_URL": restored, "PORT": str(port)}
    base = f"http://127.0.0.1:{port}"
    serve = spawn(["serve", "--app", "backup_app:jq"], served, name="serve")
    serve.wait_http(base)

    # The keys answer as they did: the unique key's holder, the idempotent request's job.
    assert post(base, "/jobs", unique)["id"] == keyed
    again = post(base, "/jobs", idempotent_body, **{"Idempotency-Key": "order-7"})
    assert again["id"] == idempotent

    def all_done() -> bool:
        rows = fetch(restored, f'SELECT status FROM "{schema}".jobs WHERE id = ANY($1)',
                     list(unfinished))  # fmt: skip
        return all(r["status"] == "completed" for r in rows)

    until("every unfinished job completed", all_done, timeout=90)
    ended = httpx.get(f"{base}/workflows/{workflow['id']}").json()
    assert ended["status"] == "completed", ended
    last_id = max(at_dump)
    until(
        "the schedule ticking again",
        lambda: fetch(
            restored,
            f"""
        SELECT 1 FROM "{schema}".jobs
        WHERE id > $1 AND payload = '{{"tick": true}}' AND status = 'completed'""",
            last_id,
        ),
    )

    # Each job unfinished at the dump ran once after it; no finished one ran again.
    ledger_now = Counter(
        (r["job_id"], r["attempt"])
        for r in fetch(restored, f'SELECT * FROM "{schema}".ledger WHERE job_id <= $1', last_id)
    )
    runs_since = ledger_now - ledger_at_dump
    assert Counter(job_id for job_id, _ in runs_since.elements()) == Counter(unfinished)
    assert (held, 2) in runs_since  # rescued: its first attempt was the one killed
    assert (flaky, 2) in runs_since
    assert "Traceback" not in serve.output, serve.output[-5000:]


def workflow_at_second(base: str, workflow_id: int) -> bool:
    nodes = {n["ref"]: n for n in httpx.get(f"{base}/workflows/{workflow_id}").json()["jobs"]}
    return bool(nodes["first"]["job"]["status"] == "completed")
