"""The recipes under examples/, each run as its README says (real processes, a real
PostgreSQL): the app's rows and its jobs commit together or not at all, and a worker
runs the jobs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.conftest import ROOT, Process, Spawn, free_port

EXAMPLES = ROOT / "examples"
DJANGO_PROJECT = EXAMPLES / "django_project"
TIMEOUT = 20.0


@pytest.fixture
def app_schema(pg_dsn: str) -> Iterator[str]:
    """A schema of its own for the example app's tables (the DSN's search_path)."""
    name = f"app_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{name}" CASCADE')


@pytest.fixture
def example_env(pg_dsn: str, schema: str, app_schema: str) -> dict[str, str]:
    """What a user exports: DATABASE_URL (app and queue alike) and JOBQUEUE_SCHEMA."""
    separator = "&" if "?" in pg_dsn else "?"
    env = {
        **os.environ,
        "DATABASE_URL": f"{pg_dsn}{separator}options=-csearch_path%3D{app_schema}",
        "JOBQUEUE_SCHEMA": schema,
        "POLL_INTERVAL_SECONDS": "0.2",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.pop("JOBQUEUE_APP", None)
    return env


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def ok(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, f"{result.args} exited {result.returncode}:\n{result.stderr}"
    return result.stdout.splitlines()


def wait_until(condition: Callable[[], bool], *procs: Process) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        for proc in procs:
            if proc.popen.poll() is not None:
                raise AssertionError(f"{proc.popen.args} exited early:\n{proc.output}")
        if time.monotonic() > deadline:
            logs = "\n".join(proc.output for proc in procs)
            raise AssertionError(f"not so within {TIMEOUT}s:\n{logs}")
        time.sleep(0.05)


def query(dsn: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql).fetchall()


def jobs(dsn: str, schema: str) -> list[tuple[Any, ...]]:
    return query(dsn, f'SELECT type, payload, status FROM "{schema}".jobs ORDER BY id')


# -- examples/fastapi_app ---------------------------------------------------------------


def test_fastapi_order_and_its_receipt_job_commit_together_and_the_worker_sends_it(
    spawn: Spawn,
    example_env: dict[str, str],
    pg_dsn: str,
    schema: str,
    app_schema: str,
) -> None:
    port = free_port()
    api = spawn(
        ["examples.fastapi_app.app:app", "--port", str(port)],
        example_env,
        "uvicorn",
        module="uvicorn",
        cwd=ROOT,
    )
    worker = spawn(["worker", "--app", "examples.fastapi_app.tasks:jq"], example_env, cwd=ROOT)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        # Uvicorn says its application started before it binds the port; it says
        # "running on" once it listens.
        wait_until(lambda: "Uvicorn running on" in api.output, api)
        order = {"email": "a@example.com", "sku": "book", "quantity": 2}
        placed = client.post("/orders", json=order)
        assert placed.status_code == 201, placed.text
        order_id = placed.json()["id"]
        assert placed.json() == {**order, "id": order_id, "receipt_sent_at": None}

        # 1 book left: this request enqueues its job, then fails and rolls it back.
        refused = client.post("/orders", json={**order, "email": "b@example.com"})
        assert refused.status_code == 409
        assert refused.json() == {"detail": "not enough 'book' in stock"}

        wait_until(lambda: jobs(pg_dsn, schema)[0][2] == "completed", api, worker)
        assert client.get(f"/orders/{order_id}").json()["receipt_sent_at"] is not None
    assert f"Receipt for order {order_id} sent to a@example.com" in worker.output
    assert "b@example.com" not in worker.output
    assert jobs(pg_dsn, schema) == [("send_receipt", {"order_id": order_id}, "completed")]
    orders = query(pg_dsn, f'SELECT email FROM "{app_schema}".orders')
    assert orders == [("a@example.com",)]
    assert query(pg_dsn, f'SELECT stock FROM "{app_schema}".products') == [(1,)]
    assert worker.stop() == 0
    # uvicorn ends by re-raising the SIGTERM, once its shutdown (the lifespan's) is done.
    assert api.stop() in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in api.output


# -- examples/django_project --------------------------------------------------------------


def test_django_atomic_block_commits_orders_with_their_jobs_or_neither(
    spawn: Spawn,
    example_env: dict[str, str],
    pg_dsn: str,
    schema: str,
    app_schema: str,
) -> None:
    env = example_env
    assert "  Applying orders.0001_initial... OK" in ok(
        run(["manage.py", "migrate"], DJANGO_PROJECT, env)
    )
    assert ok(
        run(["manage.py", "makemigrations", "--check", "--dry-run"], DJANGO_PROJECT, env)
    ) == ["No changes detected"]
    ok(run(["-m", "jobqueue", "migrate"], DJANGO_PROJECT, env))

    placed = run(
        ["manage.py", "place_orders", "a@example.com:2", "b@example.com:1"], DJANGO_PROJECT, env
    )
    assert ok(placed) == ["Placed order 1 for a@example.com", "Placed order 2 for b@example.com"]
    # c's order and job are written, then d's quantity fails the block: both roll back.
    refused = run(
        ["manage.py", "place_orders", "c@example.com:1", "d@example.com:0"], DJANGO_PROJECT, env
    )
    assert refused.returncode == 1
    assert "no order placed: d@example.com: quantity must be at least 1, got 0" in refused.stderr
    assert refused.stdout == ""

    orders_sql = (
        f"SELECT id, email, receipt_sent_at IS NOT NULL"
        f' FROM "{app_schema}".orders_order ORDER BY id'
    )
    assert query(pg_dsn, orders_sql) == [(1, "a@example.com", False), (2, "b@example.com", False)]
    assert jobs(pg_dsn, schema) == [
        ("send_receipt", {"order_id": 1}, "pending"),
        ("send_receipt", {"order_id": 2}, "pending"),
    ]

    worker = spawn(["worker", "--app", "shop.worker:jq"], env, cwd=DJANGO_PROJECT)
    wait_until(lambda: {row[2] for row in jobs(pg_dsn, schema)} == {"completed"}, worker)
    assert query(pg_dsn, orders_sql) == [(1, "a@example.com", True), (2, "b@example.com", True)]
    assert "Receipt for order 1 sent to a@example.com" in worker.output
    assert "Receipt for order 2 sent to b@example.com" in worker.output
    assert worker.stop() == 0


# -- examples/script.py -------------------------------------------------------------------


def test_script_enqueues_runs_and_prints_each_outcome(
    example_env: dict[str, str], pg_dsn: str, schema: str
) -> None:
    lines = ok(run(["examples/script.py"], ROOT, example_env))
    assert "Enqueued jobs 1, 2, 3" in lines
    assert "Hello, Ada!" in lines
    assert "Hello, Grace!" in lines
    assert lines[-3:] == [
        "Job 1 greet {'name': 'Ada'}: completed, 'greeted Ada'",
        "Job 2 greet {'name': 'Grace'}: completed, 'greeted Grace'",
        "Job 3 divide {'a': 1.0, 'b': 0.0}: failed, ZeroDivisionError: float division by zero",
    ]
    assert [row[2] for row in jobs(pg_dsn, schema)] == ["completed", "completed", "failed"]
