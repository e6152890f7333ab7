"""POST /jobs, POST /jobs/batch, POST /claims and POST /outcomes are served twice: by a
plain ASGI middleware (api/lean.py), and by the FastAPI routes it hands the rest on to.
Every request here goes to the API as it is and to the same API with the FastAPI routes
alone, and both must answer the same, status, headers and body, errors included; the
requests the middleware takes must be taken without handing them on."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from jobqueue.api import create_app, lean
from jobqueue.app import JobQueue
from jobqueue.auth import tokens
from jobqueue.enqueue.new_job import NewJob

pytestmark = pytest.mark.anyio

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
# What differs between two requests that store a job: its id and times.
VOLATILE = {"id", "created_at", "updated_at", "run_at", "job_id", "lease"}
# Times compared by their shape alone ("2026-12-06T21:17:22.696616Z" as
# "9999-99-99T99:99:99.999999Z"): the lean answers write them without pydantic.
SHAPED = {"lease_expires_at"}
# The headers the two ways must agree on.
HEADERS = ("content-type", "location", "www-authenticate", "retry-after")

Outcome = tuple[int, dict[str, str], Any]
Scenario = Callable[[httpx.AsyncClient, str], Awaitable[list[Outcome]]]


def fastapi_only(app: FastAPI) -> FastAPI:
    """``app`` without the lean middleware: FastAPI serves every request, as it did before."""
    app.user_middleware = [m for m in app.user_middleware if m.cls is not lean.LeanRoutes]
    return app


@pytest.fixture
async def clients(jq: JobQueue) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    jq.settings = dataclasses.replace(
        jq.settings, max_payload_bytes=1000, max_request_bytes=20_000, auth_max_failures=3
    )

    @jq.task("typed")
    async def typed(payload: NewJob) -> None:  # any pydantic model: the payload is checked
        pass

    def client(app: FastAPI) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")

    async with (
        client(create_app(jq, check_types=False)) as lean,
        client(fastapi_only(create_app(jq, check_types=False))) as full,
    ):
        yield lean, full


@pytest.fixture
def handed_on(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the requests the lean middleware handed on to FastAPI's routes."""
    seen: list[str] = []
    original = lean.hand_on

    async def spy(app: Any, scope: Any, body: bytes, receive: Any, send: Any) -> None:
        seen.append(scope["path"])
        await original(app, scope, body, receive, send)

    monkeypatch.setattr(lean, "hand_on", spy)
    return seen


def outcome(answer: httpx.Response, tag: str) -> Outcome:
    headers = {h: answer.headers[h] for h in HEADERS if h in answer.headers}
    if "location" in headers:
        headers["location"] = re.sub(r"\d+$", "N", headers["location"])
    try:
        body = answer.json()
    except ValueError:
        body = answer.text
    return answer.status_code, headers, normal(body, tag)


def normal(value: Any, tag: str) -> Any:
    """``value`` without what differs between the two runs of a scenario: ids, times,
    and the tag that keeps their keys apart."""
    if isinstance(value, dict):
        if set(value) == {"ids", "count"}:  # a batch: consecutive new ids
            ids = value["ids"]
            return {"ids": [i - ids[0] for i in ids], "count": value["count"]}
        return {
            k: re.sub(r"\d", "9", v) if k in SHAPED else normal(v, tag)
            for k, v in value.items()
            if k not in VOLATILE
        }
    if isinstance(value, list):
        return [normal(v, tag) for v in value]
    if isinstance(value, str):
        return re.sub(r"job \d+", "job N", value.replace(tag, "TAG"))
    return value


async def both(scenario: Scenario, clients: tuple[httpx.AsyncClient, ...]) -> list[Outcome]:
    lean, full = clients
    ours = await scenario(lean, "lean-tag")
    theirs = await scenario(full, "full-tag")
    assert ours == theirs
    return ours


def post(
    client: httpx.AsyncClient,
    path: str,
    body: bytes | str,
    headers: dict[str, str | bytes] | None = None,
    content_type: str | None = "application/json",
) -> Awaitable[httpx.Response]:
    sent: dict[str, str | bytes] = dict(headers or {})
    if content_type is not None:
        sent["content-type"] = content_type
    return client.post(path, content=body, headers=sent)


VALID_JOBS = [
    '{"type": "noop"}',
    '{"type": "  padded  ", "payload": {"to": "a@example.com", "n": [1, 2.5, null, true]}}',
    '{"type": "noop", "queue": "mail", "priority": -3, "max_attempts": 7, "delay_seconds": 60}',
    '{"type": "noop", "run_at": "2030-01-01T00:00:00+02:00", "concurrency_key": "tenant-1"}',
    '{"type": "caf\\u00e9 \\ud83d\\ude00", "payload": {"k\\u00e9y": "\\u2603"}}',
    '{"type": "noop", "payload": {}, "type": "last wins"}',
    '{"type": "typed", "payload": {"type": "x"}}',
]
INVALID_JOBS = [
    "",
    "{",
    '{"type": "noop",}',
    "[]",
    '"noop"',
    "null",
    "{}",
    '{"type": ""}',
    '{"type": 7}',
    '{"type": "noop", "extra": 1}',
    '{"type": "noop", "max_attempts": 0}',
    '{"type": "noop", "priority": 2147483648}',
    '{"type": "noop", "payload": []}',
    '{"type": "noop", "payload": {"x": "\\u0000"}}',
    '{"type": "noop", "payload": {"x": "\\ud800"}}',
    '{"type": "noop", "queue": "no spaces"}',
    '{"type": "noop", "run_at": "2030-01-01T00:00:00"}',
    '{"type": "noop", "run_at": "2030-01-01T00:00:00Z", "delay_seconds": 1}',
    '{"type": "noop", "unique_for": 10}',
    '{"type": "noop", "payload": {"x": NaN}}',
    '{"type": "noop", "payload": {"x": "' + "a" * 2000 + '"}}',  # over the payload limit
    '{"type": "typed", "payload": {"nope": 1}}',  # not the task's payload type
    "[" * 100_000,  # over the request limit
]


@pytest.mark.parametrize("body", VALID_JOBS)
async def test_a_job_is_stored_and_answered_alike(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient], handed_on: list[str], body: str
) -> None:
    async def scenario(client: httpx.AsyncClient, tag: str) -> list[Outcome]:
        return [outcome(await post(client, "/jobs", body), tag)]

    [(status, headers, job)] = await both(scenario, clients)
    assert (status, headers["location"]) == (201, "/jobs/N")
    assert job["status"] == "pending"
    assert handed_on == []


@pytest.mark.parametrize("body", INVALID_JOBS)
async def test_an_invalid_job_is_refused_alike(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
    db: asyncpg.Connection,
    schema: str,
    body: str,
) -> None:
    async def scenario(client: httpx.AsyncClient, tag: str) -> list[Outcome]:
        return [outcome(await post(client, "/jobs", body), tag)]

    [(status, _, answer)] = await both(scenario, clients)
    assert status in (400, 413, 422), answer
    assert all({"field", "loc", "msg", "type"} <= set(e) for e in answer["detail"]), answer
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".jobs') == 0


@pytest.mark.parametrize(
    ("content_type", "lean", "status"),
    [
        ("application/json", True, 201),
        ("Application/JSON; charset=utf-8", True, 201),
        ("application/vnd.api+json", False, 201),
        # Not JSON: a 415 (api/media.py), whoever reads the request first.
        ("text/plain", False, 415),
        ("application/x-www-form-urlencoded", False, 415),
        (None, False, 415),
    ],
)
async def test_content_types_are_read_alike(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
    handed_on: list[str],
    content_type: str | None,
    lean: bool,
    status: int,
) -> None:
    async def scenario(client: httpx.AsyncClient, tag: str) -> list[Outcome]:
        return [outcome(await post(client, "/jobs", '{"type": "noop"}', None, content_type), tag)]

    [(answered, _, _)] = await both(scenario, clients)
    assert answered == status
    assert handed_on == ([] if lean else ["/jobs"])


async def test_non_utf8_bodies_are_refused_alike(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    async def scenario(client: httpx.AsyncClient, tag: str) -> list[Outcome]:
        return [
            outcome(await post(client, "/jobs", b'{"type": "\xff"}'), tag),
            outcome(await post(client, "/jobs", '{"type": "noop"}'.encode("utf-16")), tag),
        ]

    assert [status for status, _, _ in await both(scenario, clients)] == [400, 201]


async def test_trace_headers_are_recorded_alike(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient], handed_on: list[str]
) -> None:
    async def scenario(client: httpx.AsyncClient, tag: str) -> list[Outcome]:
        answers = []
        for headers in (
            {"traceparent": TRACEPARENT, "tracestate": "congo=t61rcWkgMzE"},
            {"traceparent": TRACEPARENT, "tracestate": "not a list"},
            {"traceparent": "not-a-traceparent"},
        ):
            answers.append(outcome(await post(client, "/jobs", '{"type": "t"}', headers), tag))
            answers.append(
                outcome(
                    await post(client, "/jobs/batch", '{"jobs": [{"type": "t"}]}', headers), tag
                )
            )
        return answers

    answers = await both(scenario, clients)
    assert [job["trace_id"] for _, _, job in answers[::2]] == [
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "4bf92f3577b34da6a3ce929d0e0e4736",
        None,
    ]
    assert handed_on == []


async def test_unique_keys_are_answered_alike(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    async def scenario(client: httpx.AsyncClient, tag: str) -> list[Outcome]:
        body = json.dumps({"type": "noop", "unique_key": f"k-{tag}", "unique_for": 60})
        return [outcome(await post(client, "/jobs", body), tag) for _ in range(2)]

    assert [status for status, _, _ in await both(scenario, clients)] == [201, 200]


async def test_idempotency_keys_are_answered_alike(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
    handed_on: list[str],
    db: asyncpg.Connection,
    schema: str,
) -> None:
    async def scenario(client: httpx.AsyncClient, tag: str) -> list[Outcome]:
        answers = []
        for key, body in [
            (f'"a-{tag}"', '{"type": "noop"}'),
            (f"a-{tag}", '{ "type" : "noop" }'),  # a bare key names the same key
            (f'"a-{tag}"', '{"type": "other"}'),  # the key with another request
            (f'"b-{tag}"', '{"type": "noop"}'),
            ("", '{"type": "noop"}'),
            ("x" * 258, '{"type": "noop"}'),
            ('"unclosed', '{"type": "noop"}'),
            ("caf\u00e9".encode(), '{"type": "noop"}'),  # as latin-1: not printable ASCII
        ]:
            headers: dict[str, str | bytes] = {"idempotency-key": key}
            answers.append(outcome(await post(client, "/jobs", body, headers), tag))
            if key == f'"b-{tag}"':  # retention deletes its job: a 410
                await db.execute(f'DELETE FROM "{schema}".jobs WHERE type = $1', "noop")
                answers.append(outcome(await post(client, "/jobs", body, headers), tag))
        return answers

    statuses = [status for status, _, _ in await both(scenario, clients)]
    assert statuses == [201, 200, 422, 201, 410, 422, 422, 422, 422]
    # Those the header's own bounds refuse; the others' errors are the lean path's own.
    assert handed_on == ["/jobs"] * 2


async def test_batches_are_answered_alike(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient], handed_on: list[str]
) -> None:
    jobs = [{"type": "noop", "payload": {"n": n}} for n in range(50)]
    bodies = [
        json.dumps({"jobs": jobs}),
        json.dumps({"jobs": [{"type": "noop", "queue": "mail", "priority": 2}]}),
        json.dumps({"jobs": [{"type": "noop"}, {"type": "noop", "on_conflict": "replace"}]}),
        json.dumps({"jobs": [{"type": "noop"}, {"type": "noop", "max_attempts": 0}]}),
        json.dumps({"jobs": [{"type": "noop", "payload": {"x": "a" * 2000}}]}),
        json.dumps({"jobs": []}),
        json.dumps({"jobs": [{"type": "noop"}], "extra": 1}),
        json.dumps({"jobs": [{"type": "typed", "payload": {"nope": 1}}]}),
        "{",
    ]

    async def scenario(client: httpx.AsyncClient, tag: str) -> list[Outcome]:
        return [outcome(await post(client, "/jobs/batch", body), tag) for body in bodies]

    answers = await both(scenario, clients)
    assert [status for status, _, _ in answers] == [201, 201, 422, 422, 413, 422, 422, 422, 400]
    assert answers[0][2] == {"ids": list(range(50)), "count": 50}
    # The bodies the models refuse, and the malformed one.
    assert handed_on == ["/jobs/batch"] * 5


async def test_tokens_scopes_and_restrictions_are_answered_alike(
    jq: JobQueue, clients: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    store = await jq.store()
    secrets = {}
    for name, scopes, queues, types in [
        ("enqueuer", ["jobs:enqueue"], None, None),
        ("reader", ["jobs:read"], None, None),
        ("mail", ["jobs:enqueue"], ["mail"], None),
        ("reports", ["jobs:enqueue", "payloads:read"], None, ["report"]),
    ]:
        stored, secrets[name] = tokens.new_token(
            name=name, scopes=scopes, queues=queues, types=types
        )
        assert await store.token_create(token=stored, expires_in_seconds=None)

    async def scenario(client: httpx.AsyncClient, tag: str) -> list[Outcome]:
        answers = []
        for token, path, body in [
            ("enqueuer", "/jobs", '{"type": "noop", "payload": {"secret": 1}}'),
            ("reader", "/jobs", '{"type": "noop"}'),
            ("reader", "/jobs/batch", '{"jobs": [{"type": "noop"}]}'),
            ("mail", "/jobs", '{"type": "noop", "queue": "mail"}'),
            ("mail", "/jobs", '{"type": "noop"}'),
            ("mail", "/jobs/batch", '{"jobs": [{"type": "n", "queue": "mail"}, {"type": "n"}]}'),
            ("reports", "/jobs", '{"type": "report", "payload": {"n": 7}}'),
            ("reports", "/jobs", '{"type": "noop"}'),
            ("mail", "/jobs", '{"type": "noop", "max_attempts": 0}'),  # the body, then the queue
        ]:
            headers = {"authorization": f"Bearer {secrets[token]}"}
            answers.append(outcome(await post(client, path, body, headers), tag))
        for authorization in [None, "Basic abc", "Bearer jqt_nope_nope", "Bearer x", "Bearer y"]:
            headers = {} if authorization is None else {"authorization": authorization}
            answers.append(outcome(await post(client, "/jobs", '{"type": "noop"}', headers), tag))
        return answers

    answers = await both(scenario, clients)
    statuses = [status for status, _, _ in answers]
    assert statuses == [201, 403, 403, 201, 403, 403, 201, 403, 422, 401, 401, 401, 429, 429]
    assert answers[0][2]["payload"] is None  # no payloads:read: hidden
    assert answers[6][2]["payload"] == {"n": 7}
    assert "'default'" in answers[4][2]["detail"]  # the 403 names the queue


async def test_claims_and_outcomes_are_answered_alike(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient], handed_on: list[str]
) -> None:
    async def scenario(client: httpx.AsyncClient, tag: str) -> list[Outcome]:
        queue = f"q-{tag}"
        jobs = [{"type": "resize", "queue": queue, "payload": {"n": n}} for n in range(4)]
        assert (await post(client, "/jobs/batch", json.dumps({"jobs": jobs}))).status_code == 201
        order = {"worker": "w1", "queues": [queue], "types": ["resize"], "max": 4}
        claim = await post(client, "/claims", json.dumps(order))
        answers = [outcome(claim, tag)]
        leases = [job["lease"] for job in claim.json()["jobs"]]
        for body in [
            json.dumps({**order, "max": 0}),
            json.dumps({**order, "wait_seconds": 61}),
            json.dumps({**order, "worker": "w 1"}),
            json.dumps({**order, "extra": True}),
            json.dumps({**order, "wait_seconds": 0}),  # none left
            "{",
        ]:
            answers.append(outcome(await post(client, "/claims", body), tag))
        done = [
            {"lease": leases[0], "result": {"ok": True}},
            {"lease": leases[1], "error": {"type": "Boom", "message": "m"}, "retry_in_seconds": 30},
            {"lease": leases[2], "error": {"type": "Fatal"}, "discard": True},
        ]
        for body in [
            json.dumps({"outcomes": done}),
            json.dumps({"outcomes": done[:1]}),  # sent again: answered as applied
            json.dumps({"outcomes": [{"lease": "1.2.w1"}]}),  # no job it holds: refused
            json.dumps({"outcomes": [{"lease": "nope"}]}),
            # Its form is a lease's, but its job id does not fit a bigint.
            json.dumps({"outcomes": [{"lease": "9223372036854775808.1.w1"}]}),
            json.dumps({"outcomes": []}),
            '{"outcomes": [{"lease": "' + leases[3] + '", "result": NaN}]}',
            json.dumps({"outcomes": [{"lease": leases[3], "bogus": 1}]}),
        ]:
            answers.append(outcome(await post(client, "/outcomes", body), tag))
        return answers

    answers = await both(scenario, clients)
    statuses = [status for status, _, _ in answers]
    assert statuses == [200, 422, 422, 422, 422, 200, 400, 200, 200, 200, 422, 422, 422, 422, 422]
    [overflow] = answers[11][2]["detail"]
    assert overflow["loc"] == ["body", "outcomes", 0, "lease"]
    assert "not a lease" in overflow["msg"]
    assert [j["payload"] for j in answers[0][2]["jobs"]] == [{"n": n} for n in range(4)]
    assert [(o["ok"], o["status"]) for o in answers[7][2]["outcomes"]] == [
        (True, "completed"),
        (True, "pending"),
        (True, "failed"),
    ]
    assert answers[8][2]["outcomes"][0]["status"] == "completed"
    assert answers[9][2]["outcomes"][0]["ok"] is False
    # The bodies the models refuse, and the malformed ones.
    assert handed_on == ["/claims"] * 5 + ["/outcomes"] * 5


async def test_an_api_mounted_under_a_prefix_is_served_by_its_fastapi_routes(
    jq: JobQueue, handed_on: list[str]
) -> None:
    outer = FastAPI()
    outer.mount("/queue", create_app(jq, check_types=False))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=outer), base_url="http://test"
    ) as client:
        stored = await post(client, "/queue/jobs", '{"type": "noop"}')
        refused = await post(client, "/queue/jobs", '{"type": ""}')
        batch = await post(client, "/queue/jobs/batch", '{"jobs": [{"type": "noop"}]}')
    assert (stored.status_code, stored.headers["location"]) == (201, f"/jobs/{stored.json()['id']}")
    assert (refused.status_code, refused.json()["detail"][0]["field"]) == (422, "type")
    assert batch.status_code == 201
    assert handed_on == []  # passed by, not handed on


async def test_other_methods_and_paths_reach_fastapi_as_before(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient], handed_on: list[str]
) -> None:
    async def scenario(client: httpx.AsyncClient, tag: str) -> list[Outcome]:
        return [
            outcome(await client.request(method, path, content=b'{"type": "noop"}'), tag)
            for method, path in [
                ("GET", "/jobs/batch"),
                ("PUT", "/jobs"),
                ("DELETE", "/jobs/batch"),
                ("POST", "/jobs/"),
                ("POST", "/jobs/batch/"),
                ("POST", "/jobsx"),
            ]
        ]

    statuses = [status for status, _, _ in await both(scenario, clients)]
    # GET and DELETE /jobs/batch: /jobs/{id} with an id that is no number.
    assert statuses == [422, 405, 422, 307, 307, 404]
    assert handed_on == []
