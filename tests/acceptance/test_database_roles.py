"""`jobqueue worker` and `jobqueue api` run as the least-privilege roles `jobqueue grants`
prints (`--no-migrate`: the schema's owner migrates): the worker runs jobs to their end,
maintenance included, and the API serves its routes."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import httpx

from tests.conftest import MakeRole, Spawn, jobqueue


def test_a_worker_runs_jobs_to_their_end_as_the_worker_role(
    env: dict[str, str], spawn: Spawn, make_role: MakeRole, pg_dsn: str, schema: str
) -> None:
    _, dsn = make_role("worker")
    jobs = [
        ("send_email", '{"to": "a@example.com"}', None),  # logs (job_logs)
        ("fail_test", "{}", None),  # attempts (job_attempts), retries, dead letter
        ("sleep", '{"seconds": 0.3}', None),  # progress
        ("noop", "{}", "once"),  # a unique key, released on completion
    ]
    ids = asyncio.run(enqueue(pg_dsn, schema, jobs))
    worker = spawn(
        ["worker", "--no-migrate"],
        {
            **env,
            "DATABASE_URL": dsn,
            "RETRY_DELAY_SECONDS": "0",
            "JOBQUEUE_RESCUE_INTERVAL": "0.2",
            "JOBQUEUE_PROGRESS_INTERVAL": "0.1",
            "JOBQUEUE_RETAIN_COMPLETED": "forever",
            "JOBQUEUE_CRON": "noop=* * * * *",
        },
    )
    statuses = asyncio.run(wait_for_end(pg_dsn, schema, ids))
    assert statuses == ["completed", "failed", "completed", "completed"], worker.output
    worker.wait_for_output("This process is now the maintenance leader")
    assert asyncio.run(folded(pg_dsn, schema)), worker.output  # the leader's compaction ran
    assert "maintenance failed" not in worker.output  # nor did any of its round fail
    assert worker.stop() == 0
    for trouble in ("permission denied", "InsufficientPrivilege", "maintenance failed"):
        assert trouble not in worker.output, worker.output


def test_the_api_serves_as_the_api_role(
    env: dict[str, str], spawn: Spawn, make_role: MakeRole
) -> None:
    _, dsn = make_role("api")
    api = spawn(["api", "--no-migrate"], {**env, "DATABASE_URL": dsn})
    base = f"http://127.0.0.1:{env['PORT']}"
    api.wait_http(base)
    with httpx.Client(base_url=base) as client:
        created = client.post("/jobs", json={"type": "noop", "unique_key": "k"})
        assert created.status_code == 201, created.text
        job = created.json()
        again = client.post("/jobs", json={"type": "noop", "unique_key": "k"})
        assert (again.status_code, again.json()["id"]) == (200, job["id"])
        batch = client.post("/jobs/batch", json={"jobs": [{"type": "noop"}] * 2})
        assert batch.status_code == 201, batch.text
        keyed = [
            client.post("/jobs", json={"type": "noop"}, headers={"Idempotency-Key": '"o-1"'})
            for _ in range(2)
        ]
        assert [r.status_code for r in keyed] == [201, 200], keyed[0].text
        listed = client.get("/jobs")
        assert listed.status_code == 200
        assert len(listed.json()["jobs"]) == 4
        assert client.get(f"/jobs/{job['id']}").json()["status"] == "pending"
        assert client.get(f"/jobs/{job['id']}/attempts").status_code == 200
        assert client.post(f"/jobs/{job['id']}/cancel").json()["status"] == "cancelled"
        assert client.post(f"/jobs/{job['id']}/retry").json()["status"] == "pending"
        assert client.post("/queues/default/pause").json()["paused"] is True
        assert client.post("/queues/default/resume").json()["paused"] is False
        assert client.get("/queues").json()["queues"][0]["pending"] == 4
        assert client.get("/workers").status_code == 200
        assert client.get("/readyz").status_code == 200
        # An HTTP worker's whole loop, a limited queue's claim among it.
        limited = client.patch("/queues/images", json={"rate_limit": "100/s"})
        assert limited.status_code == 200, api.output
        ids = [client.post("/jobs", json={"type": "resize", "queue": q}).json()["id"]
               for q in ("images", "default")]  # fmt: skip
        claim = {"worker": "w1", "queues": ["images", "default"], "max": 10}
        claimed = client.post("/claims", json=claim)
        assert claimed.status_code == 200, api.output
        jobs = {j["id"]: j for j in claimed.json()["jobs"]}
        assert set(ids) <= set(jobs), jobs
        images, other = jobs[ids[0]], jobs[ids[1]]
        for path, body in (
            (f"/jobs/{ids[0]}/heartbeat", {"lease": images["lease"], "progress": {"fraction": 1}}),
            (f"/jobs/{ids[0]}/logs", {"lease": images["lease"], "lines": ["resized"]}),
            (f"/jobs/{ids[0]}/complete", {"lease": images["lease"], "result": {"ok": True}}),
            (f"/jobs/{ids[1]}/fail", {"lease": other["lease"], "error": {"type": "Boom"}}),
        ):
            assert client.post(path, json=body).status_code == 200, (path, api.output)
        assert "http:anonymous:w1" in [w["id"] for w in client.get("/workers").json()]
    assert api.stop() == 0
    assert "permission denied" not in api.output, api.output


def test_durable_jobs_run_as_the_worker_role_and_are_signalled_as_the_api_role(
    env: dict[str, str], spawn: Spawn, make_role: MakeRole
) -> None:
    """Steps, a wait for a signal, children spawned and waited for (the trigger that
    releases their parent runs as the worker role), and the signal sent through the
    API as the api role: no privilege is missing."""
    _, worker_dsn = make_role("worker")
    _, api_dsn = make_role("api")
    durable = {**env, "JOBQUEUE_APP": "durable_app:jq"}
    api = spawn(["api", "--no-migrate"], {**durable, "DATABASE_URL": api_dsn}, name="api")
    base = f"http://127.0.0.1:{env['PORT']}"
    api.wait_http(base)
    worker = spawn(["worker", "--no-migrate"], {**durable, "DATABASE_URL": worker_dsn})
    with httpx.Client(base_url=base) as client:
        order = {"type": "order_flow", "payload": {"order": 3, "items": ["a", "b"]}}
        job_id = client.post("/jobs", json=order).json()["id"]
        deadline = time.monotonic() + 30
        while client.get(f"/jobs/{job_id}").json()["status"] != "waiting":
            assert time.monotonic() < deadline, worker.output
            time.sleep(0.05)
        sent = client.post("/signals", json={"name": "approved", "job_id": job_id,
                                              "payload": {"by": "ana"}})  # fmt: skip
        assert sent.status_code == 201, (sent.text, api.output)
        done = client.get(f"/jobs/{job_id}", params={"wait": 30}, timeout=40).json()
        assert done["status"] == "completed", (done, worker.output)
        assert done["result"]["boxes"] == ["box-a", "box-b"]
    assert worker.stop() == 0
    assert api.stop() == 0
    for output in (worker.output, api.output):
        for trouble in ("permission denied", "InsufficientPrivilege"):
            assert trouble not in output, output


async def enqueue(dsn: str, schema: str, jobs: list[tuple[str, str, str | None]]) -> list[int]:
    """Jobs inserted as the schema's owner: (type, payload, unique key)."""
    conn = await asyncpg.connect(dsn)
    try:
        return [
            await conn.fetchval(
                f'INSERT INTO "{schema}".jobs (type, payload, unique_key) '
                "VALUES ($1, $2::jsonb, $3) RETURNING id",
                type_,
                payload,
                key,
            )
            for type_, payload, key in jobs
        ]
    finally:
        await conn.close()


async def wait_for_end(dsn: str, schema: str, ids: list[int], timeout: float = 30) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + timeout
        while True:
            rows = await conn.fetch(
                f'SELECT status FROM "{schema}".jobs WHERE id = ANY($1) ORDER BY id', ids
            )
            statuses = [r["status"] for r in rows]
            if all(s in ("completed", "failed") for s in statuses) or time.monotonic() > deadline:
                return statuses
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


async def folded(dsn: str, schema: str, timeout: float = 10) -> bool:
    """Whether the counter changes of the jobs' inserts and updates reach queue_totals."""
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await conn.fetchval(
                f"""SELECT completed >= 3 FROM "{schema}".queue_totals WHERE queue = 'default'"""
            ):
                return True
            await asyncio.sleep(0.1)
        return False
    finally:
        await conn.close()


def test_grants_refuses_bad_role_names_and_unmigrated_schemas_in_one_line(
    env: dict[str, str],
) -> None:
    for role in ("app; DROP TABLE jobs", 'a"b', "1app", "x" * 64):
        done = jobqueue(env, "grants", "--role", role, "--for", "enqueue")
        assert done.returncode == 2, done
        assert done.stderr.splitlines() == [
            "jobqueue: error: --role must be a role name of letters, digits and _ (not "
            f"starting with a digit, at most 63), got {role!r}"
        ]
        assert done.stdout == ""
    done = jobqueue(
        {**env, "JOBQUEUE_SCHEMA": "never_migrated"}, "grants", "--role", "app", "--for", "api"
    )
    assert done.returncode == 1, done
    assert done.stderr.splitlines() == [
        "jobqueue: error: schema 'never_migrated' is not migrated to this version; "
        "run jobqueue migrate (as its owner) first"
    ]
