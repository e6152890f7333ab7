"""Authentication over real HTTP against real `jobqueue api` processes: every route
refuses every kind of bad token and changes nothing; revocation reaches a second
process; a token created by the CLI works at once, and made-up ones cost bounded
reads; a non-loopback bind with no token is refused before anything starts; payloads
are redacted without `payloads:read`; a client that keeps failing is slowed down."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from jobqueue.auth.tokens import new_token
from jobqueue.config import Settings
from jobqueue.db.migrate import code_version
from jobqueue.db.store import Store
from jobqueue.release import version
from tests.conftest import Process, Spawn, free_port, free_ports, jobqueue

pytestmark = pytest.mark.anyio


async def make_token(
    db: asyncpg.Connection,
    schema: str,
    name: str,
    scopes: list[str],
    *,
    queues: list[str] | None = None,
) -> str:
    stored, secret = new_token(name=name, scopes=scopes, queues=queues)
    assert await Store(db, schema).token_create(token=stored, expires_in_seconds=None)
    return secret


@dataclass
class Tokens:
    admin: str
    expired: str
    revoked: str
    lacking: str  # metrics:read only
    reader: str  # jobs:read only: lacks the scope of /metrics
    other_queue: str  # every scope but admin, for queue "other" only


async def tokens(db: asyncpg.Connection, schema: str) -> Tokens:
    everything = [
        "jobs:enqueue", "jobs:read", "payloads:read", "jobs:control", "queues:control",
        "metrics:read", "jobs:work", "schedules:control", "jobs:signal",
    ]  # fmt: skip
    made = Tokens(
        admin=await make_token(db, schema, "admin", ["admin"]),
        expired=await make_token(db, schema, "expired", ["admin"]),
        revoked=await make_token(db, schema, "revoked", ["admin"]),
        lacking=await make_token(db, schema, "lacking", ["metrics:read"]),
        reader=await make_token(db, schema, "reader", ["jobs:read"]),
        other_queue=await make_token(db, schema, "other", everything, queues=["other"]),
    )
    await db.execute(
        f"""UPDATE "{schema}".api_tokens SET expires_at = now() - interval '1 hour'
            WHERE name = 'expired'"""
    )
    assert await Store(db, schema).token_revoke(name="revoked")
    return made


@pytest.fixture
def api(spawn: Spawn, env: dict[str, str]) -> tuple[str, Process]:
    # The matrix below fails to authenticate some hundred times from one address.
    server = spawn(["api"], dict(env, JOBQUEUE_AUTH_MAX_FAILURES="100000"), name="api")
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)
    return base, server


# A body each route accepts, and its path's parameters, for a job of queue "default".
BODIES: dict[tuple[str, str], Any] = {
    ("post", "/jobs"): {"type": "noop"},
    ("post", "/jobs/batch"): {"jobs": [{"type": "noop"}]},
    ("post", "/jobs/cancel"): {},
    ("post", "/jobs/retry"): {},
    ("patch", "/queues/{name}"): {"global_limit": 5},
    ("post", "/workflows"): {"jobs": [{"ref": "a", "type": "noop"}]},
    # A worker over HTTP's, with a lease no claim handed out ({id}: the pending job's).
    ("post", "/claims"): {"worker": "w1", "queues": ["default"]},
    ("post", "/jobs/{job_id}/heartbeat"): {"lease": "{id}.1.w1"},
    ("post", "/jobs/{job_id}/complete"): {"lease": "{id}.1.w1"},
    ("post", "/jobs/{job_id}/fail"): {"lease": "{id}.1.w1", "error": {"type": "E"}},
    ("post", "/jobs/{job_id}/logs"): {"lease": "{id}.1.w1", "lines": ["x"]},
    ("post", "/jobs/{job_id}/release"): {"lease": "{id}.1.w1"},
    ("post", "/heartbeats"): {"leases": ["{id}.1.w1"]},
    ("post", "/outcomes"): {"outcomes": [{"lease": "{id}.1.w1"}]},
    ("post", "/jobs/{job_id}/snooze"): {"lease": "{id}.1.w1", "seconds": 1},
    ("patch", "/jobs/{id}"): {"priority": 1},
    # A schedule of queue "default" (the type's, with no task for it here).
    ("post", "/schedules"): {"name": "nightly", "type": "noop", "every": "1h"},
    ("patch", "/schedules/{name}"): {"every": "2h"},
    ("post", "/signals"): {"name": "approved", "job_id": "{id}"},
}

# What the token restricted to queue "other" gets on a job or queue of "default":
# refused where it names the queue, not found by id, nothing within reach by filter.
OTHER_QUEUE = {
    ("post", "/jobs"): 403,
    ("post", "/jobs/batch"): 403,
    ("get", "/jobs/{id}"): 404,
    ("get", "/jobs/{id}/attempts"): 404,
    ("post", "/jobs/{id}/retry"): 404,
    ("post", "/jobs/{id}/cancel"): 404,
    ("post", "/queues/{name}/pause"): 403,
    ("post", "/queues/{name}/resume"): 403,
    ("patch", "/queues/{name}"): 403,
    ("post", "/workflows"): 403,
    ("get", "/workflows/{id}"): 404,  # no workflow has the id of the job used
    ("post", "/workflows/{id}/cancel"): 404,
    # A claim names its queues; a lease that holds nothing is refused (the batches
    # answer each lease, refused).
    ("post", "/claims"): 403,
    ("post", "/jobs/{job_id}/heartbeat"): 409,
    ("post", "/jobs/{job_id}/complete"): 409,
    ("post", "/jobs/{job_id}/fail"): 409,
    ("post", "/jobs/{job_id}/logs"): 409,
    ("post", "/jobs/{job_id}/release"): 409,
    ("post", "/jobs/{job_id}/snooze"): 409,
    ("patch", "/jobs/{id}"): 404,
    ("post", "/jobs/{id}/run-now"): 404,
    ("delete", "/jobs/{id}"): 404,
    ("post", "/signals"): 404,  # the job, by id
    # Schedules: none exists by the name used, and making one of queue "default" is
    # out of its reach.
    ("post", "/schedules"): 403,
    ("get", "/schedules/{name}"): 404,
    ("patch", "/schedules/{name}"): 404,
    ("delete", "/schedules/{name}"): 404,
    ("post", "/schedules/{name}/pause"): 404,
    ("post", "/schedules/{name}/resume"): 404,
    ("post", "/schedules/{name}/trigger"): 404,
}


async def snapshot(db: asyncpg.Connection, schema: str) -> list[str]:
    rows = []
    for table in ("jobs", "queues", "api_tokens", "job_attempts"):
        for r in await db.fetch(f'SELECT * FROM "{schema}".{table} ORDER BY 1'):
            rows.append(f"{table}: {dict(r.items())}")
    return rows


async def test_every_route_refuses_each_bad_token_and_changes_nothing(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    base, _ = api
    made = await tokens(db, schema)
    pending = await db.fetchval(
        f"""INSERT INTO "{schema}".jobs (type) VALUES ('noop') RETURNING id"""
    )
    await db.execute(
        f"""INSERT INTO "{schema}".jobs (type, status, attempts, finished_at)
            VALUES ('noop', 'failed', 3, now())"""
    )
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        schema_doc = (await client.get("/openapi.json")).json()
    operations = [
        (method, path, op["x-scope"])
        for path, ops in schema_doc["paths"].items()
        for method, op in ops.items()
        if "x-scope" in op
    ]
    assert len(operations) >= 14, operations
    before = await snapshot(db, schema)

    async with httpx.AsyncClient(base_url=base, timeout=30) as client:

        async def call(method: str, path: str, token: str | None) -> httpx.Response:
            url = (
                path.replace("{id}", str(pending))
                .replace("{job_id}", str(pending))
                .replace("{name}", "default")
            )
            headers = {"Content-Type": "application/json"}
            if token is not None:
                headers["Authorization"] = token
            body = BODIES.get((method, path))
            text = None if body is None else json.dumps(body).replace("{id}", str(pending))
            return await client.request(method, url, headers=headers, content=text)

        for method, path, scope in operations:
            where = f"{method.upper()} {path}"
            missing = await call(method, path, None)
            assert missing.status_code == 401, where
            assert missing.headers["www-authenticate"] == "Bearer", where
            for bad in ("Bearer", "Basic dXNlcjpwYXNz", "Bearer jqt_nope", "Bearer " + "x" * 64):
                answer = await call(method, path, bad)
                assert answer.status_code == 401, (where, bad)
                assert answer.headers["www-authenticate"].startswith("Bearer"), where
            expired = await call(method, path, f"Bearer {made.expired}")
            assert (expired.status_code, expired.json()["detail"]) == (401, "the token expired")
            revoked = await call(method, path, f"Bearer {made.revoked}")
            assert (revoked.status_code, revoked.json()["detail"]) == (401, "the token was revoked")
            lacking = made.reader if scope == "metrics:read" else made.lacking
            refused = await call(method, path, f"Bearer {lacking}")
            assert refused.status_code == 403, where
            assert scope in refused.json()["detail"], where
            assert f'scope="{scope}"' in refused.headers["www-authenticate"], where
            other = await call(method, path, f"Bearer {made.other_queue}")
            expected = 403 if scope == "admin" else OTHER_QUEUE.get((method, path), 200)
            assert other.status_code == expected, (where, other.text)
            if other.status_code == 200 and path in ("/jobs/cancel", "/jobs/retry"):
                assert set(other.json().values()) == {0}, (where, other.text)
            if other.status_code == 200 and path == "/jobs":
                assert other.json()["jobs"] == [], where
            if other.status_code == 200 and path == "/queues":
                assert other.json()["queues"] == [], where

        assert await snapshot(db, schema) == before
        assert (await call("get", "/jobs/{id}", f"Bearer {made.admin}")).status_code == 200


async def test_a_client_that_keeps_failing_is_refused_for_a_while(
    spawn: Spawn, env: dict[str, str], db: asyncpg.Connection, schema: str
) -> None:
    base = f"http://127.0.0.1:{env['PORT']}"
    spawn(["api"], env).wait_http(base)  # JOBQUEUE_AUTH_MAX_FAILURES: 20, the default
    admin = await make_token(db, schema, "admin", ["admin"])
    async with httpx.AsyncClient(base_url=base) as client:
        statuses = [
            (await client.get("/jobs", headers={"Authorization": f"Bearer jqt_x_{i}"})).status_code
            for i in range(25)
        ]
        assert statuses[:20] == [401] * 20
        assert statuses[20:] == [429] * 5
        # The right token from that address waits too: otherwise a guess could still be
        # told apart from a refusal.
        blocked = await client.get("/jobs", headers={"Authorization": f"Bearer {admin}"})
        assert blocked.status_code == 429
        assert 1 <= int(blocked.headers["retry-after"]) <= 60
        health = await client.get("/healthz")  # open to all, with the release
        assert health.status_code == 200
        assert health.json() == {
            "status": "ok",
            "version": version(),
            "schema_version": code_version(),
        }


async def test_revocation_reaches_a_second_api_process_within_a_second(
    spawn: Spawn, env: dict[str, str], db: asyncpg.Connection, schema: str
) -> None:
    first, second = dict(env), dict(env, PORT=str(free_ports(1, besides=int(env["PORT"]))[0]))
    for e in (first, second):
        spawn(["api"], e, name=f"api-{e['PORT']}").wait_http(f"http://127.0.0.1:{e['PORT']}")
    secret = await make_token(db, schema, "ci", ["jobs:read"])
    headers = {"Authorization": f"Bearer {secret}"}
    urls = [f"http://127.0.0.1:{e['PORT']}/jobs" for e in (first, second)]
    async with httpx.AsyncClient(headers=headers) as client:
        deadline = time.monotonic() + 5
        while [(await client.get(u)).status_code for u in urls] != [200, 200]:
            assert time.monotonic() < deadline, "a new token was not accepted within 5 s"
            await asyncio.sleep(0.1)

        revoked = await asyncio.to_thread(jobqueue, env, "tokens", "revoke", "ci")
        assert revoked.returncode == 0, revoked.stderr
        # The promise is a second. Each process rereads the tokens before it answers
        # once its view is 0.5 s old, so a request sent in the second half of that
        # second is refused however slowly the machine then answers it.
        within = time.monotonic() + 1.0
        for url in urls:
            answer = await client.get(url)
            while answer.status_code == 200 and time.monotonic() < within:
                await asyncio.sleep(0.05)
                answer = await client.get(url)
            assert (answer.status_code, answer.json()["detail"]) == (401, "the token was revoked")


def test_a_bind_beyond_loopback_needs_a_token_or_an_explicit_override(
    spawn: Spawn, env: dict[str, str]
) -> None:
    refused = jobqueue(env, "api", "--host", "0.0.0.0")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        "jobqueue: error: refusing to serve HTTP on 0.0.0.0 without authentication: create "
        "a token (jobqueue tokens create --name NAME --scope SCOPE), set "
        "JOBQUEUE_ADMIN_TOKEN, or pass --insecure-no-auth"
    ]

    base = f"http://127.0.0.1:{env['PORT']}"
    server = spawn(["api", "--host", "0.0.0.0", "--insecure-no-auth"], env, name="insecure")
    server.wait_http(base)
    assert "with no authentication" in server.output
    assert httpx.get(f"{base}/jobs").status_code == 200
    server.stop()

    created = jobqueue(env, "tokens", "create", "--name", "ops", "--scope", "admin", "--json")
    assert created.returncode == 0, created.stderr
    secret = json.loads(created.stdout)["secret"]
    server = spawn(["api", "--host", "0.0.0.0"], env, name="with-token")
    server.wait_http(base)
    assert httpx.get(f"{base}/jobs").status_code == 401
    assert httpx.get(f"{base}/jobs", headers={"Authorization": f"Bearer {secret}"}).is_success
    assert httpx.get(f"{base}/readyz").status_code == 200


def test_the_bootstrap_token_of_the_environment(spawn: Spawn, env: dict[str, str]) -> None:
    secret = "s" * 40
    env.update(JOBQUEUE_ADMIN_TOKEN=secret)
    base = f"http://127.0.0.1:{env['PORT']}"
    spawn(["api", "--host", "0.0.0.0"], env).wait_http(base)
    assert httpx.get(f"{base}/queues").status_code == 401
    assert httpx.get(f"{base}/queues", headers={"Authorization": f"Bearer {secret}"}).is_success

    short = jobqueue(dict(env, JOBQUEUE_ADMIN_TOKEN="short", PORT=str(free_port())), "api")
    assert short.returncode == 1
    assert "JOBQUEUE_ADMIN_TOKEN must be at least 32 characters" in short.stderr


async def test_payloads_results_and_logs_need_payloads_read(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str, settings: Settings
) -> None:
    base, _ = api
    reader = await make_token(db, schema, "reader", ["jobs:read"])
    full = await make_token(db, schema, "full", ["jobs:read", "payloads:read"])
    mailer = await make_token(db, schema, "mailer", ["jobs:enqueue", "jobs:read"], queues=["mail"])
    job_id = await db.fetchval(
        f"""INSERT INTO "{schema}".jobs
                (type, queue, payload, status, attempts, result, finished_at)
            VALUES ('send', 'mail', '{{"to": "a@example.com"}}', 'completed', 1,
                    '{{"message_id": 7}}', now()) RETURNING id"""
    )
    await db.execute(
        f"""INSERT INTO "{schema}".job_logs (job_id, attempt, started_at, worker_id, log)
            VALUES ($1, 1, now(), 'w', 'sent to a@example.com')""",
        job_id,
    )
    async with httpx.AsyncClient(base_url=base) as client:

        async def get(path: str, token: str) -> Any:
            answer = await client.get(path, headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 200, answer.text
            return answer.json()

        hidden = await get(f"/jobs/{job_id}", reader)
        assert (hidden["payload"], hidden["result"], hidden["status"]) == (None, None, "completed")
        assert (await get("/jobs", reader))["jobs"][0]["payload"] is None
        # Nor can it probe them with a payload filter (docs/search.md).
        probe = await client.get(
            "/jobs?payload.to=a@example.com", headers={"Authorization": f"Bearer {reader}"}
        )
        assert probe.status_code == 403, probe.text
        assert "payloads scope" in probe.json()["detail"]
        assert [j["id"] for j in (await get("/jobs?payload.to=a@example.com", full))["jobs"]] == [
            job_id
        ]
        attempts = (await get(f"/jobs/{job_id}/attempts", reader))["attempts"]
        assert [a["log"] for a in attempts] == [None]

        shown = await get(f"/jobs/{job_id}", full)
        assert (shown["payload"], shown["result"]) == ({"to": "a@example.com"}, {"message_id": 7})
        attempts = (await get(f"/jobs/{job_id}/attempts", full))["attempts"]
        assert "a@example.com" in attempts[0]["log"]

        # A token for one queue sees that queue's jobs only, and enqueues nowhere else.
        assert [j["id"] for j in (await get("/jobs", mailer))["jobs"]] == [job_id]
        assert [q["name"] for q in (await get("/queues", mailer))["queues"]] == ["mail"]
        auth = {"Authorization": f"Bearer {mailer}"}
        billing = await client.post("/jobs", json={"type": "x", "queue": "billing"}, headers=auth)
        assert billing.status_code == 403
        assert "billing" in billing.json()["detail"]
        mail = await client.post("/jobs", json={"type": "x", "queue": "mail"}, headers=auth)
        assert mail.status_code == 201

        # Of the workers, it sees those serving its queue, and of each only that queue.
        store = Store(db, schema)
        await store.worker_register(
            worker_id="w-mail", host="h1", pid=1, queues=["default", "mail"], slots=5,
            types=["x"], any_type=False,
        )  # fmt: skip
        await store.worker_register(
            worker_id="w-billing", host="h2", pid=2, queues=["billing"], slots=5,
            types=["x"], any_type=False,
        )  # fmt: skip
        seen = [(w["id"], w["queues"]) for w in await get("/workers", mailer)]
        assert seen == [("w-mail", ["mail"])]
        assert len(await get("/workers", full)) == 2


async def test_tokens_over_http_with_the_admin_scope(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    base, _ = api
    admin = {"Authorization": f"Bearer {await make_token(db, schema, 'ops', ['admin'])}"}
    async with httpx.AsyncClient(base_url=base, headers=admin) as client:
        new = {"name": "ci", "scopes": ["jobs:read"], "queues": ["mail"]}
        created = await client.post("/tokens", json=new)
        assert created.status_code == 201, created.text
        secret = created.json()["secret"]
        assert created.json()["state"] == "active"
        assert (await client.post("/tokens", json=new)).status_code == 409
        bad = await client.post("/tokens", json={"name": "x", "scopes": ["jobs:write"]})
        assert bad.status_code == 422
        assert bad.json()["detail"][0]["field"] == "scopes.0"
        # Text the database cannot store is refused by field, and stores nothing.
        for field, value in (("queues", "\ud800"), ("types", "a\x00b"), ("queues", "a b")):
            unstorable = {"name": "x", "scopes": ["jobs:read"], field: [value]}
            refused = await client.post(  # JSON's escapes: httpx cannot encode "\ud800"
                "/tokens",
                content=json.dumps(unstorable),
                headers={"Content-Type": "application/json"},
            )
            assert refused.status_code == 422, refused.text
            assert refused.json()["detail"][0]["field"] == f"{field}.0"

        listed = await client.get("/tokens")
        assert secret not in listed.text
        assert [t["name"] for t in listed.json()["tokens"]] == ["ops", "ci"]

        ci = {"Authorization": f"Bearer {secret}"}
        assert (await client.get("/jobs", headers=ci)).status_code == 200
        assert (await client.get("/tokens", headers=ci)).status_code == 403
        revoked = await client.post("/tokens/ci/revoke")
        assert (revoked.status_code, revoked.json()["state"]) == (200, "revoked")
        assert (await client.post("/tokens/ci/revoke")).status_code == 404
        within = time.monotonic() + 1.0
        answer = await client.get("/jobs", headers=ci)
        while answer.status_code == 200 and time.monotonic() < within:
            await asyncio.sleep(0.05)
            answer = await client.get("/jobs", headers=ci)
        assert answer.status_code == 401

    audited = await db.fetch(
        f'SELECT actor, action, target, result, client FROM "{schema}".audit_log ORDER BY id'
    )
    assert [tuple(r.values()) for r in audited] == [
        ("ops", "token.create", "ci", "ok", "127.0.0.1"),
        ("ops", "token.create", "ci", "conflict:exists", "127.0.0.1"),
        ("ci", "request.refused", "GET /tokens", "forbidden:scope=admin", "127.0.0.1"),
        ("ops", "token.revoke", "ci", "ok", "127.0.0.1"),
        ("ops", "token.revoke", "ci", "not_found", "127.0.0.1"),
    ]


async def test_a_token_created_by_the_cli_works_at_once_on_a_busy_server(
    spawn: Spawn, env: dict[str, str], db: asyncpg.Connection, schema: str
) -> None:
    """A deploy script creates a token and uses it in its next line, while other clients
    keep the server's view of the tokens young: its first request is accepted."""
    base = f"http://127.0.0.1:{env['PORT']}"
    spawn(["serve"], env, name="serve").wait_http(base)
    busy = {"Authorization": f"Bearer {await make_token(db, schema, 'busy', ['jobs:read'])}"}
    stop = asyncio.Event()

    async def traffic() -> None:
        async with httpx.AsyncClient(base_url=base, headers=busy) as client:
            while not stop.is_set():
                assert (await client.get("/queues")).status_code == 200
                await asyncio.sleep(0.02)

    other_clients = asyncio.create_task(traffic())
    try:
        async with httpx.AsyncClient(base_url=base) as client:
            for attempt in range(5):
                created = await asyncio.to_thread(
                    jobqueue, env, "tokens", "create", "--name", f"deploy-{attempt}",
                    "--scope", "jobs:enqueue", "--json",
                )  # fmt: skip
                assert created.returncode == 0, created.stderr
                secret = json.loads(created.stdout)["secret"]
                answer = await client.post(
                    "/jobs", json={"type": "noop"}, headers={"Authorization": f"Bearer {secret}"}
                )
                assert answer.status_code == 201, (attempt, answer.text)
    finally:
        stop.set()
        await other_clients


def token_reads(metrics: str, reason: str) -> float:
    line = f'jobqueue_api_token_reads_total{{reason="{reason}"}} '
    return float(next(x for x in metrics.splitlines() if x.startswith(line)).split()[-1])


async def test_made_up_key_ids_cost_a_bounded_number_of_token_reads(
    spawn: Spawn, env: dict[str, str], db: asyncpg.Connection, schema: str
) -> None:
    """Each made-up key id could be a token created a moment ago, so it has the tokens
    read again before it is refused; a flood of them shares the reads, one at a time,
    at most one per REREAD_SECONDS (as jobqueue_api_token_reads_total counts them)."""
    from jobqueue.auth.authenticator import REREAD_SECONDS

    base = f"http://127.0.0.1:{env['PORT']}"
    # A flood from many addresses, as far as the failure limit is concerned.
    spawn(["api"], dict(env, JOBQUEUE_AUTH_MAX_FAILURES="100000"), name="api").wait_http(base)
    admin = {"Authorization": f"Bearer {await make_token(db, schema, 'ops', ['admin'])}"}
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        assert (await client.get("/jobs", headers=admin)).status_code == 200
        before = token_reads((await client.get("/metrics", headers=admin)).text, "unknown_key")

        async def stream() -> list[tuple[int, str]]:
            answers = []
            for _ in range(25):
                made_up = f"Bearer jqt_{secrets.token_hex(6)}_{secrets.token_urlsafe(32)}"
                answer = await client.get("/jobs", headers={"Authorization": made_up})
                answers.append((answer.status_code, answer.json()["detail"]))
            return answers

        started = time.monotonic()
        streams = await asyncio.gather(*(stream() for _ in range(20)))
        elapsed = time.monotonic() - started
        after = token_reads((await client.get("/metrics", headers=admin)).text, "unknown_key")

    assert {a for answers in streams for a in answers} == {(401, "unknown token")}
    reads = after - before
    # Every read for these began within the flood, each at least REREAD_SECONDS after
    # the one before; one read per made-up key id would be 500.
    assert 1 <= reads <= elapsed / REREAD_SECONDS + 1, (reads, elapsed)


@pytest.mark.parametrize("command", ["serve", "api"])
def test_a_start_refused_for_want_of_a_token_starts_nothing_first(
    tmp_path: Path, spawn: Spawn, command: str
) -> None:
    """On the embedded default, the refusal comes before the migrations, the worker and
    its LISTEN: one line on stderr (where they log), and exit code 1. Then what the line
    says to do works: `tokens create` on the schema not yet made, and a start with it."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "JOBQUEUE_TEST_DATABASE_URL", "JOBQUEUE_SCHEMA")
    }
    env.update(PORT=str(free_port()), JOBQUEUE_DATA_DIR=str(tmp_path / "data"))
    refused = subprocess.run(
        [sys.executable, "-m", "jobqueue", command, "--host", "0.0.0.0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert refused.stderr.splitlines() == [
        "jobqueue: error: refusing to serve HTTP on 0.0.0.0 without authentication: create "
        "a token (jobqueue tokens create --name NAME --scope SCOPE), set "
        "JOBQUEUE_ADMIN_TOKEN, or pass --insecure-no-auth"
    ]
    created = subprocess.run(
        [sys.executable, "-m", "jobqueue", "tokens", "create", "--name", "ops", "--scope",
         "admin", "--json"],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    secret = json.loads(created.stdout)["secret"]
    base = f"http://127.0.0.1:{env['PORT']}"
    spawn([command, "--host", "0.0.0.0"], env, name=command, cwd=tmp_path).wait_http(base, 60)
    assert httpx.get(f"{base}/jobs").status_code == 401
    assert httpx.get(f"{base}/jobs", headers={"Authorization": f"Bearer {secret}"}).is_success
