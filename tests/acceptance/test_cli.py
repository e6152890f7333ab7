"""The `jobqueue` command as a user runs it: output for people, --json for scripts, and one
clear line with a non-zero exit for bad input."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.db.sql import migrations
from tests.conftest import Spawn, dead_letters, jobqueue

pytestmark = pytest.mark.anyio


def test_migrate_applies_the_schema_once(env: dict[str, str]) -> None:
    result = jobqueue(env, "migrate")
    assert (result.returncode, result.stdout) == (0, "schema up to date\n")
    fresh_env = {**env, "JOBQUEUE_SCHEMA": env["JOBQUEUE_SCHEMA"] + "_fresh"}
    try:
        fresh = jobqueue(fresh_env, "migrate")
        versions = ", ".join(str(m.version) for m in migrations(fresh_env["JOBQUEUE_SCHEMA"]))
        assert (fresh.returncode, fresh.stdout) == (0, f"applied migrations: {versions}\n")
        assert jobqueue(fresh_env, "migrate").stdout == "schema up to date\n"
    finally:
        asyncio.run(drop_schema(env["DATABASE_URL"], fresh_env["JOBQUEUE_SCHEMA"]))


async def drop_schema(dsn: str, schema: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def test_enqueue_then_get_and_list(env: dict[str, str]) -> None:
    # No worker runs: --force stores jobs that no live worker has announced a handler for.
    out = jobqueue(
        env, "enqueue", "send_email", '{"to": "a@example.com"}', "--queue", "mail", "--force"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("enqueued job ")
    assert out.stdout.endswith(" (send_email) in queue mail: pending\n")
    job_id = out.stdout.split()[2]

    as_json = json.loads(
        jobqueue(env, "enqueue", "noop", "--json", "--priority", "3", "--force").stdout
    )
    assert (as_json["type"], as_json["priority"], as_json["status"]) == ("noop", 3, "pending")

    shown = jobqueue(env, "jobs", "get", job_id)
    assert shown.returncode == 0
    assert "type: send_email" in shown.stdout
    assert 'payload: {"to": "a@example.com"}' in shown.stdout
    got = json.loads(jobqueue(env, "jobs", "get", job_id, "--json").stdout)
    assert (got["id"], got["queue"]) == (int(job_id), "mail")

    table = jobqueue(env, "jobs", "list").stdout.splitlines()
    assert table[0].split()[:4] == ["ID", "TYPE", "QUEUE", "STATUS"]
    assert [line.split()[1] for line in table[1:]] == ["noop", "send_email"]
    listed = json.loads(jobqueue(env, "jobs", "list", "--status", "pending", "--json").stdout)
    assert [j["id"] for j in listed] == [as_json["id"], int(job_id)]
    assert jobqueue(env, "jobs", "list", "--status", "failed").stdout == "no jobs\n"


@pytest.mark.parametrize(
    ("args", "extra_env", "message"),
    [
        (["enqueue", "noop", "{not json"], {}, "payload is not valid JSON"),
        (["enqueue", "noop", "[1, 2]"], {}, "payload must be a JSON object"),
        (["enqueue", "", "{}"], {}, "type: must be a non-empty string"),
        (["enqueue", "noop", "--max-attempts", "0"], {}, "max_attempts: must be an integer from 1"),
        (["enqueue", "noop", "--run-at", "tomorrow"], {}, "--run-at must be an ISO 8601 time"),
        (["jobs", "list", "--limit", "0"], {}, "--limit must be from 1 to 10000"),
        (["serve"], {"WORKER_COUNT": "abc"}, "WORKER_COUNT must be a positive integer, got 'abc'"),
        (["serve", "--worker-count", "0"], {}, "WORKER_COUNT must be a positive integer, got '0'"),
        (["serve"], {"PORT": "http"}, "PORT must be a port number from 0 to 65535, got 'http'"),
        (
            ["serve"],
            {"POLL_INTERVAL_SECONDS": "-1"},
            "POLL_INTERVAL_SECONDS must be a positive number of seconds, got '-1'",
        ),
        (
            ["serve"],
            {"RETRY_DELAY_SECONDS": "soon"},
            "RETRY_DELAY_SECONDS must be a number of seconds >= 0, got 'soon'",
        ),
        (["serve"], {"JOBQUEUE_SCHEMA": "Bad-Name"}, "JOBQUEUE_SCHEMA must be a lowercase SQL"),
        (["serve"], {"JOBQUEUE_APP": "nomodule"}, "JOBQUEUE_APP must look like 'module:attribute'"),
        (["serve", "--app", "no_such_module:jq"], {}, "cannot import 'no_such_module'"),
    ],
)
def test_bad_input_is_one_line_and_a_non_zero_exit(
    env: dict[str, str], args: list[str], extra_env: dict[str, str], message: str
) -> None:
    result = jobqueue({**env, **extra_env}, *args)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("jobqueue: error: ")
    assert message in lines[0]
    assert json.loads(jobqueue(env, "jobs", "list", "--json").stdout) == []


def test_unknown_job_id_exits_1(env: dict[str, str]) -> None:
    result = jobqueue(env, "jobs", "get", "424242")
    assert (result.returncode, result.stderr) == (1, "jobqueue: error: job 424242 not found\n")


def test_a_reader_that_leaves_early_is_no_error(env: dict[str, str]) -> None:
    """`jobqueue jobs list | head -1`: the output's reader goes away before the command
    writes. The command ends as one killed by SIGPIPE would (141), saying nothing; it
    said "database unavailable: Broken pipe"."""
    assert jobqueue(env, "enqueue", "send_email", "{}", "--force").returncode == 0
    with subprocess.Popen(
        [sys.executable, "-m", "jobqueue", "jobs", "list"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as listing:
        assert listing.stdout is not None
        assert listing.stderr is not None
        listing.stdout.close()  # before the command writes a line
        assert listing.wait(60) == 141
        assert listing.stderr.read() == ""


def test_port_in_use_is_one_line(env: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = jobqueue({**env, "PORT": str(port)}, "serve")
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in result.stderr


def test_jobs_get_wait_shows_the_outcome_result_and_progress(
    env: dict[str, str], spawn: Spawn
) -> None:
    env.update(JOBQUEUE_APP="jobqueue.demo:jq")
    job_id = jobqueue(env, "enqueue", "sleep", '{"seconds": 0.5}', "--json", "--force")
    sleeper = str(json.loads(job_id.stdout)["id"])
    pending = jobqueue(env, "jobs", "get", sleeper, "--wait", "0.2")  # no worker yet
    assert pending.returncode == 0
    assert "status: pending" in pending.stdout
    worker = spawn(["worker"], env)
    done = jobqueue(env, "jobs", "get", sleeper, "--wait", "30")
    assert done.returncode == 0, done.stderr
    assert "status: completed" in done.stdout
    assert 'result: {"slept_seconds": 0.5}' in done.stdout
    assert '"message": "slept 0.5s of 0.5s"' in done.stdout
    assert worker.stop() == 0
    bad = jobqueue(env, "jobs", "get", sleeper, "--wait", "0")
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == "jobqueue: error: --wait must be a positive number of seconds, got 0.0\n"
    missing = jobqueue(env, "jobs", "get", "424242", "--wait", "1")
    assert (missing.returncode, missing.stderr) == (1, "jobqueue: error: job 424242 not found\n")


async def test_cancel_from_the_cli(env: dict[str, str], jq: JobQueue) -> None:
    job = await jq.enqueue("x")
    out = jobqueue(env, "jobs", "cancel", str(job.id))
    assert (out.returncode, out.stdout) == (0, f"job {job.id} (x) is cancelled\n")
    await jq.enqueue_many("x", [{}] * 3)
    assert json.loads(jobqueue(env, "jobs", "cancel", "--type", "x", "--json").stdout) == {
        "cancelled": 3,
        "requested": 0,
    }
    nothing = jobqueue(env, "jobs", "cancel")
    assert (nothing.returncode, nothing.stderr.count("\n")) == (2, 1)


async def test_retry_from_the_cli(env: dict[str, str], db: asyncpg.Connection, schema: str) -> None:
    one, *_ = await dead_letters(db, schema, [("mail", "a", 1), ("mail", "a", 1), ("sms", "a", 1)])
    out = jobqueue(env, "jobs", "retry", str(one))
    assert (out.returncode, out.stdout) == (0, f"job {one} (mail) is pending again\n")
    again = jobqueue(env, "jobs", "retry", str(one))
    assert again.returncode == 1
    assert again.stderr == (
        f"jobqueue: error: cannot retry job {one}: it is pending; only failed or cancelled "
        "jobs can be\n"
    )
    assert json.loads(jobqueue(env, "jobs", "retry", "--type", "mail", "--json").stdout) == {
        "retried": 1
    }
    nothing = jobqueue(env, "jobs", "retry")
    assert (nothing.returncode, nothing.stderr.count("\n")) == (2, 1)
    assert "--all" in nothing.stderr
    naive = jobqueue(env, "jobs", "retry", "--finished-after", "2026-01-01T00:00:00")
    assert (naive.returncode, "needs a time zone" in naive.stderr) == (2, True)
    assert jobqueue(env, "jobs", "retry", "--all").stdout == "1 job pending again\n"


async def test_queues_from_the_cli(env: dict[str, str], jq: JobQueue) -> None:
    await jq.enqueue("x", queue="mail")
    out = jobqueue(env, "queues", "pause", "mail")
    assert out.returncode == 0, out.stderr
    header, row = (line.split() for line in out.stdout.splitlines())
    assert header == ["QUEUE", "PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED",
                      "OLDEST", "STATE", "LIMITS"]  # fmt: skip
    assert row[:6] == ["mail", "1", "0", "0", "0", "0"]
    assert row[6].endswith("s")
    assert row[7] == "paused"
    listed = json.loads(jobqueue(env, "queues", "--json").stdout)
    assert [(q["name"], q["paused"]) for q in listed] == [("mail", True)]
    assert jobqueue(env, "queues", "resume", "mail").stdout.splitlines()[1].split()[-1] == "active"
    bad = jobqueue(env, "queues", "pause", "no spaces")
    assert (bad.returncode, bad.stderr.count("\n")) == (2, 1)
    assert bad.stderr.startswith("jobqueue: error: queue: must match")


async def test_queue_limits_from_the_cli(env: dict[str, str], jq: JobQueue) -> None:
    out = jobqueue(env, "queues", "limit", "mail", "--global-limit", "5", "--rate-limit", "10/s")
    assert out.returncode == 0, out.stderr
    row = out.stdout.splitlines()[1]
    assert row.split()[:2] == ["mail", "0"]
    assert row.endswith("global 0/5 rate 0/10/s")
    cleared = jobqueue(env, "queues", "limit", "mail", "--rate-limit", "none", "--json")
    [shown] = json.loads(cleared.stdout)
    assert (shown["limits"]["global_limit"], shown["limits"]["rate_limit"]) == (5, None)
    assert (await jq.queue("mail")).limits == (await jq.queues())[0].limits
    for flags, message in [
        (["--rate-limit", "10/d"], "jobqueue: error: rate_limit: must be N/s"),
        (["--global-limit", "many"], "jobqueue: error: --global-limit: must be a whole number"),
        ([], "jobqueue: error: queues limit: give at least one of"),
    ]:
        bad = jobqueue(env, "queues", "limit", "mail", *flags)
        assert (bad.returncode, bad.stderr.count("\n")) == (2, 1), bad.stderr
        assert bad.stderr.startswith(message), bad.stderr
    limits = (await jq.queue("mail")).limits
    assert limits is not None
    assert (limits.global_limit, limits.rate_limit) == (5, None)  # nothing stored on a refusal


def test_the_queue_flag_sets_limits(spawn: Spawn, env: dict[str, str]) -> None:
    worker = spawn(["worker", "--queue", "mail=3", "--queue", "default"], env, name="worker")
    worker.wait_for_output("queues='mail=3,default'")
    assert worker.stop() == 0


def test_a_concurrency_key_from_the_cli(env: dict[str, str]) -> None:
    keyed = jobqueue(env, "enqueue", "x", "--concurrency-key", "tenant-7", "--json", "--force")
    assert json.loads(keyed.stdout)["concurrency_key"] == "tenant-7"
    empty = jobqueue(env, "enqueue", "x", "--concurrency-key", "", "--force")
    assert empty.returncode == 2, empty
    assert len(empty.stderr.splitlines()) == 1
    assert "concurrency_key" in empty.stderr


def test_unique_enqueue_from_the_cli(env: dict[str, str]) -> None:
    unique = ("enqueue", "x", "--unique-key", "k", "--json", "--force")
    first = json.loads(jobqueue(env, *unique).stdout)
    second = json.loads(jobqueue(env, *unique).stdout)
    assert first["id"] == second["id"]
    assert first["unique_key"] == "k"
