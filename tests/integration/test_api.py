"""The HTTP API: the job resource, listing, health, and every bad input with its status,
its message naming the field, and nothing stored."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from jobqueue import demo
from jobqueue.api import create_app
from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.db.migrate import code_version
from jobqueue.release import version

pytestmark = pytest.mark.anyio

JOB_FIELDS = {
    "id",
    "type",
    "queue",
    "payload",
    "status",
    "attempts",
    "max_attempts",
    "priority",
    "run_at",
    "last_error",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "unique_key",
    "cancel_requested_at",
}
# What GET /jobs/{id} adds for a job no durable handler ran (docs/durable.md).
NOT_DURABLE = {"steps": [], "waiting_for": None, "spawned_by": None, "children": None}


@pytest.fixture
async def client(jq: JobQueue) -> AsyncIterator[httpx.AsyncClient]:
    jq.settings = dataclasses.replace(
        jq.settings, max_payload_bytes=1000, max_request_bytes=200_000
    )
    jq.tasks.update(demo.jq.tasks)
    app = create_app(jq)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as c:
        yield c


async def count_jobs(db: asyncpg.Connection, schema: str) -> int:
    n: int = await db.fetchval(f'SELECT count(*) FROM "{schema}".jobs')
    return n


async def test_post_creates_a_pending_job_with_location(client: httpx.AsyncClient) -> None:
    r = await client.post("/jobs", json={"type": "send_email", "payload": {"to": "a@b.c"}})
    assert r.status_code == 201
    job = r.json()
    assert job.keys() >= JOB_FIELDS
    assert r.headers["location"] == f"/jobs/{job['id']}"
    assert job["status"] == "pending"
    assert job["payload"] == {"to": "a@b.c"}
    assert (job["queue"], job["priority"], job["attempts"], job["max_attempts"]) == (
        "default",
        0,
        0,
        3,
    )
    got = await client.get(r.headers["location"])
    assert got.status_code == 200
    # The job, and what a durable handler would have recorded: none of it here.
    assert got.json() == {**job, **NOT_DURABLE}


async def test_post_takes_every_optional_field(client: httpx.AsyncClient) -> None:
    r = await client.post(
        "/jobs",
        json={
            "type": "noop",
            "payload": {},
            "max_attempts": 7,
            "priority": -5,
            "queue": "reports",
            "run_at": "2030-01-01T00:00:00Z",
        },
    )
    assert r.status_code == 201, r.text
    job = r.json()
    assert (job["max_attempts"], job["priority"], job["queue"]) == (7, -5, "reports")
    assert job["run_at"].startswith("2030-01-01T00:00:00")
    delayed = (await client.post("/jobs", json={"type": "noop", "delay_seconds": 3600})).json()
    assert delayed["run_at"] > delayed["created_at"]


async def test_list_is_newest_first_with_keyset_pages_and_filters(
    client: httpx.AsyncClient,
) -> None:
    ids = [
        (await client.post("/jobs", json={"type": t, "queue": q})).json()["id"]
        for t, q in [
            ("noop", "a"),
            ("send_email", "a"),
            ("noop", "b"),
            ("noop", "a"),
            ("noop", "a"),
        ]
    ]
    page1 = (await client.get("/jobs", params={"limit": 2})).json()
    assert [j["id"] for j in page1["jobs"]] == ids[::-1][:2]
    page2 = (await client.get("/jobs", params={"limit": 2, "after": page1["next_after"]})).json()
    assert [j["id"] for j in page2["jobs"]] == ids[::-1][2:4]
    page3 = (await client.get("/jobs", params={"limit": 2, "after": page2["next_after"]})).json()
    assert [j["id"] for j in page3["jobs"]] == ids[:1]
    assert page3["next_after"] is None
    only = (await client.get("/jobs", params={"type": "noop", "queue": "a"})).json()["jobs"]
    assert [j["id"] for j in only] == [ids[4], ids[3], ids[0]]
    assert (await client.get("/jobs", params={"status": "completed"})).json()["jobs"] == []
    assert len((await client.get("/jobs", params={"status": "pending"})).json()["jobs"]) == 5


async def test_health_and_readiness(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {
        "status": "ok",
        "version": version(),
        "schema_version": code_version(),
    }
    ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["database"] == "ok"


async def test_openapi_documents_the_endpoints(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    assert {"/jobs", "/jobs/batch", "/jobs/{id}", "/healthz", "/readyz"} <= spec["paths"].keys()
    assert (await client.get("/docs")).status_code == 200


BAD_BODIES = [
    # (body, status, field, words in the message)
    ('{"type": "noop",', 400, "body", "malformed JSON"),
    ("{}", 422, "type", "Field required"),
    ('{"payload": {}}', 422, "type", "Field required"),
    ('{"type": ""}', 422, "type", "at least 1 character"),
    ('{"type": "   "}', 422, "type", "at least 1 character"),
    ('{"type": 5}', 422, "type", "valid string"),
    ('{"type": "noop", "payload": [1]}', 422, "payload", "valid dictionary"),
    ('{"type": "noop", "max_attempts": 0}', 422, "max_attempts", "greater than or equal to 1"),
    ('{"type": "noop", "max_attempts": "x"}', 422, "max_attempts", "valid integer"),
    ('{"type": "noop", "priority": 1e12}', 422, "priority", "less than or equal"),
    ('{"type": "noop", "queue": "no spaces"}', 422, "queue", "match pattern"),
    ('{"type": "noop", "colour": "red"}', 422, "colour", "unknown field"),
    ('{"type": "noop", "run_at": "2030-01-01T00:00:00"}', 422, "run_at", "timezone"),
    ('{"type": "noop", "delay_seconds": -1}', 422, "delay_seconds", "greater than or equal"),
    (
        '{"type": "noop", "delay_seconds": 1, "run_at": "2030-01-01T00:00:00Z"}',
        422,
        "body",
        "not both",
    ),
    ('{"type": "nosuch"}', 422, "type", "known types: fail_test, noop, send_email, sleep"),
    # Python strips \x1c-\x1f as whitespace, as the row's check does.
    ('{"type": "\\u001d"}', 422, "type", "at least 1 character"),
    # Text PostgreSQL cannot store: a 422, not the database's error as a 500.
    ('{"type": "noop\\u0000"}', 422, "type", "NUL character"),
    ('{"type": "noop", "unique_key": "\\udc00"}', 422, "unique_key", "unicode string"),
    ('{"type": "noop", "payload": {"a": [{"b": "\\u0000"}]}}', 422, "payload", "a.0.b: "),
    ('{"type": "noop", "payload": {"\\ud800": 1}}', 422, "payload", "surrogate pair"),
    # Numbers Python's parser reads and jsonb refuses.
    ('{"type": "noop", "payload": {"a": [NaN]}}', 422, "payload", "a.0: nan is not a JSON"),
    ('{"type": "noop", "payload": {"a": -Infinity}}', 422, "payload", "a: -inf is not a JSON"),
    ('{"type": "noop", "delay_seconds": NaN}', 422, "delay_seconds", "finite number"),
    ('{"type": "noop", "delay_seconds": Infinity}', 422, "delay_seconds", "finite number"),
    ('{"type": "noop", "unique_key": "k", "unique_for": NaN}', 422, "unique_for", "finite"),
    (b'{"type": "\xff"}', 400, "body", "malformed body"),  # not UTF-8
    (
        '{"type": "noop", "payload": {"x": "' + "a" * 1000 + '"}}',
        413,
        "payload",
        "JOBQUEUE_MAX_PAYLOAD_BYTES",
    ),
    (
        '{"type": "noop", "payload": {"x": "' + "a" * 100_000 + '"}}',
        413,
        "payload",
        "JOBQUEUE_MAX_PAYLOAD_BYTES",
    ),
]


@pytest.mark.parametrize(("body", "status", "field", "words"), BAD_BODIES)
async def test_bad_job_is_refused_naming_the_field_and_nothing_is_stored(
    client: httpx.AsyncClient,
    db: asyncpg.Connection,
    schema: str,
    body: str | bytes,
    status: int,
    field: str,
    words: str,
) -> None:
    r = await client.post("/jobs", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    errors = r.json()["detail"]
    assert any(e["field"] == field and words in e["msg"] for e in errors), errors
    assert await count_jobs(db, schema) == 0


# Each route's body, valid, and the path to send it to.
JSON_BODIES = {
    ("post", "/jobs"): {"type": "noop"},
    ("post", "/jobs/batch"): {"jobs": [{"type": "noop"}]},
    ("post", "/jobs/cancel"): {},
    ("post", "/jobs/retry"): {},
    ("patch", "/queues/{name}"): {"global_limit": 5},
    ("post", "/workflows"): {"jobs": [{"ref": "a", "type": "noop"}]},
    ("post", "/tokens"): {"name": "t", "scopes": ["jobs:read"]},
    ("post", "/claims"): {"worker": "w"},
    ("post", "/jobs/{job_id}/heartbeat"): {"lease": "1.1.w"},
    ("post", "/jobs/{job_id}/complete"): {"lease": "1.1.w"},
    ("post", "/jobs/{job_id}/fail"): {"lease": "1.1.w", "error": {"type": "E"}},
    ("post", "/jobs/{job_id}/logs"): {"lease": "1.1.w", "lines": ["x"]},
    ("post", "/jobs/{job_id}/release"): {"lease": "1.1.w"},
    ("post", "/jobs/{job_id}/snooze"): {"lease": "1.1.w", "seconds": 1},
    ("post", "/heartbeats"): {"leases": ["1.1.w"]},
    ("post", "/outcomes"): {"outcomes": [{"lease": "1.1.w"}]},
    ("post", "/schedules"): {"name": "n", "type": "noop", "every": "1m"},
    ("patch", "/jobs/{id}"): {"priority": 1},
    ("patch", "/schedules/{name}"): {"every": "2m"},
    ("post", "/signals"): {"name": "approved", "job_id": 1},
}


@pytest.mark.parametrize(
    ("content_type", "words"),
    [
        ("text/plain", "must be application/json, got 'text/plain'"),
        # What curl -d sends unless told otherwise.
        ("application/x-www-form-urlencoded", "curl --json"),
        # A web page can send this across origins without a preflight.
        (None, "the body needs the header Content-Type: application/json"),
    ],
)
async def test_a_body_that_is_not_json_is_a_415_on_every_route_with_a_body(
    client: httpx.AsyncClient,
    db: asyncpg.Connection,
    schema: str,
    content_type: str | None,
    words: str,
) -> None:
    document = (await client.get("/openapi.json")).json()
    operations = {
        (method, path)
        for path, ops in document["paths"].items()
        for method, op in ops.items()
        if "requestBody" in op
    }
    assert operations == set(JSON_BODIES)  # a new route with a body is listed here
    for (method, path), body in JSON_BODIES.items():
        headers = {} if content_type is None else {"content-type": content_type}
        r = await client.request(
            method,
            path.replace("{name}", "mail").replace("{job_id}", "1").replace("{id}", "1"),
            content=json.dumps(body),
            headers=headers,
        )
        where = f"{method} {path}"
        assert r.status_code == 415, (where, r.text)
        [error] = r.json()["detail"]
        assert (error["field"], error["type"]) == ("Content-Type", "unsupported_media_type")
        assert words in error["msg"], (where, error)
        assert r.headers[f"accept-{method}"] == "application/json", where
    stored = await db.fetchval(
        f"""SELECT (SELECT count(*) FROM "{schema}".jobs)
                 + (SELECT count(*) FROM "{schema}".api_tokens)
                 + (SELECT count(*) FROM "{schema}".audit_log)"""
    )
    assert stored == 0
    # No body at all: the route names the missing body, as before.
    r = await client.post("/jobs/cancel")
    assert (r.status_code, r.json()["detail"][0]["field"]) == (422, "body")


@pytest.mark.parametrize(
    ("job", "field", "words"),
    [
        ('{"ref": "b", "type": "noop", "payload": {"a": [NaN]}}', "jobs.1.payload", "a.0: nan"),
        ('{"ref": "b", "type": "noop", "payload": {"a": Infinity}}', "jobs.1.payload", "a: inf"),
        ('{"ref": "b", "type": "noop", "delay_seconds": NaN}', "jobs.1.delay_seconds", "finite"),
    ],
)
async def test_a_workflow_with_a_number_json_does_not_have_stores_nothing(
    client: httpx.AsyncClient,
    db: asyncpg.Connection,
    schema: str,
    job: str,
    field: str,
    words: str,
) -> None:
    body = '{"jobs": [{"ref": "a", "type": "noop"}, ' + job + "]}"
    r = await client.post("/workflows", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert any(e["field"] == field and words in e["msg"] for e in r.json()["detail"]), r.text
    assert await count_jobs(db, schema) == 0


@pytest.mark.parametrize(
    ("path", "status", "words"),
    [
        ("/jobs/999999", 404, "job 999999 not found"),
        ("/jobs/1?wait=NaN", 422, "finite number"),
        ("/jobs/abc", 422, "valid integer"),
        ("/jobs/0", 422, "greater than or equal to 1"),
        ("/jobs/99999999999999999999", 422, "less than or equal"),
        ("/jobs?status=done", 422, "'pending'"),
        ("/jobs?limit=0", 422, "greater than or equal to 1"),
        ("/jobs?after=x", 422, "valid integer"),
        ("/jobs?queue=%00", 422, "NUL character"),
        ("/audit?actor=a%00", 422, "NUL character"),
        ("/schedules?after=a%00", 422, "NUL character"),
    ],
)
async def test_bad_lookup_is_refused(
    client: httpx.AsyncClient, path: str, status: int, words: str
) -> None:
    r = await client.get(path)
    assert r.status_code == status, r.text
    assert words in r.text


async def test_unknown_type_is_accepted_when_the_api_runs_without_workers(
    jq: JobQueue,
) -> None:
    app = create_app(jq, check_types=False)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as c:
        r = await c.post("/jobs", json={"type": "handled_elsewhere"})
    assert r.status_code == 201


async def test_a_type_a_live_http_worker_serves_is_accepted_in_its_queue(
    client: httpx.AsyncClient,
) -> None:
    """Where the API runs workers (it checks types), a type no task here handles is
    accepted once a live worker announces it: a worker over HTTP does when it claims."""
    resize = {"type": "resize", "queue": "images"}
    assert (await client.post("/jobs", json=resize)).status_code == 422
    claim = {"worker": "ts-1", "queues": ["images"], "types": ["resize"]}
    assert (await client.post("/claims", json=claim)).json() == {"jobs": [], "outcomes": []}
    assert (await client.post("/jobs", json=resize)).status_code == 201
    batch = {"jobs": [resize, {"type": "noop"}]}
    assert (await client.post("/jobs/batch", json=batch)).status_code == 201
    elsewhere = await client.post("/jobs", json={"type": "resize", "queue": "other"})
    assert elsewhere.status_code == 422
    assert "no live worker of its queue announces one" in elsewhere.text
    workflow = {"jobs": [{"ref": "a", **resize}, {"ref": "b", "type": "noop", "depends_on": ["a"]}]}
    assert (await client.post("/workflows", json=workflow)).status_code == 201


async def test_batch_stores_every_job_in_order(client: httpx.AsyncClient) -> None:
    jobs = [{"type": "noop", "payload": {"n": n}} for n in range(300)]
    jobs[7] = {"type": "send_email", "payload": {"to": "x@y.z"}, "queue": "mail", "priority": 2}
    r = await client.post("/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["count"] == 300
    assert body["ids"] == sorted(body["ids"])
    seventh = (await client.get(f"/jobs/{body['ids'][7]}")).json()
    assert (seventh["type"], seventh["queue"], seventh["priority"]) == ("send_email", "mail", 2)
    last = (await client.get(f"/jobs/{body['ids'][-1]}")).json()
    assert last["payload"] == {"n": 299}


@pytest.mark.parametrize(
    ("jobs", "status", "field", "words"),
    [
        (
            [{"type": "noop"}, {"type": "noop"}, {"type": "noop", "max_attempts": 0}],
            422,
            "jobs.2.max_attempts",
            "greater than or equal to 1",
        ),
        ([{"type": "noop"}, {"type": "nosuch"}], 422, "jobs.1.type", "known types"),
        (
            [{"type": "noop", "payload": {"x": "a" * 2000}}],
            413,
            "jobs.0.payload",
            "JOBQUEUE_MAX_PAYLOAD_BYTES",
        ),
        ([{"type": "noop", "extra": 1}], 422, "jobs.0.extra", "unknown field"),
        ([], 422, "jobs", "at least 1 item"),
        ([{"type": "noop"}] * 10_001, 422, "jobs", "at most 10000 items"),
    ],
)
async def test_batch_with_a_bad_job_stores_none(
    client: httpx.AsyncClient,
    db: asyncpg.Connection,
    schema: str,
    jobs: list[dict[str, object]],
    status: int,
    field: str,
    words: str,
) -> None:
    r = await client.post("/jobs/batch", json={"jobs": jobs})
    assert r.status_code == status, r.text
    errors = r.json()["detail"]
    assert any(e["field"] == field and words in e["msg"] for e in errors), errors
    assert await count_jobs(db, schema) == 0


async def test_request_body_over_the_limit_is_refused_unread(
    client: httpx.AsyncClient, db: asyncpg.Connection, schema: str
) -> None:
    jobs = [{"type": "noop", "payload": {"x": "a" * 500}}] * 1000  # ~530 kB > 200 kB
    r = await client.post("/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 413
    assert "JOBQUEUE_MAX_REQUEST_BYTES" in r.json()["detail"][0]["msg"]
    assert await count_jobs(db, schema) == 0


async def test_a_query_stuck_behind_a_lock_is_cancelled_and_answered_503(
    settings: Settings, db: asyncpg.Connection, schema: str
) -> None:
    jq = JobQueue(settings=dataclasses.replace(settings, statement_timeout=0.3))
    app = create_app(jq)
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://test"
        ) as c:
            assert (await c.get("/jobs")).status_code == 200
            async with db.transaction():
                await db.execute(f'LOCK TABLE "{schema}".jobs IN ACCESS EXCLUSIVE MODE')
                stuck = await c.get("/jobs")
            assert stuck.status_code == 503
            assert stuck.json() == {"detail": "database unavailable; retry later"}
            assert (await c.get("/jobs")).status_code == 200
    finally:
        await jq.close()
