"""Declared job types (jq.types, `jobqueue types`): POST /jobs, /jobs/batch and
/workflows accept a declared type that no task here runs and no live worker announces,
check its payloads against the declared JSON Schema (every error named by its field,
nothing stored), and see a change within jobqueue.job_types.REFRESH_SECONDS."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from jobqueue import demo, job_types
from jobqueue.api import create_app
from jobqueue.app import JobQueue
from jobqueue.audit import Actor
from jobqueue.job_types import SchemaError

pytestmark = pytest.mark.anyio

RESIZE = {
    "type": "object",
    "required": ["path"],
    "properties": {"path": {"type": "string"}, "width": {"type": "integer", "minimum": 1}},
    "additionalProperties": False,
}
BY = Actor("test")


@pytest.fixture
async def client(jq: JobQueue) -> AsyncIterator[httpx.AsyncClient]:
    """An API that checks types, as `jobqueue serve`'s does, with the demo tasks."""
    jq.tasks.update(demo.jq.tasks)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(jq)), base_url="http://test"
    ) as c:
        yield c


async def stored(db: asyncpg.Connection, schema: str) -> list[str]:
    rows = await db.fetch(f'SELECT type FROM "{schema}".jobs ORDER BY id')
    return [r["type"] for r in rows]


async def test_a_declared_type_is_accepted_with_no_worker_up(
    jq: JobQueue, client: httpx.AsyncClient, db: asyncpg.Connection, schema: str
) -> None:
    refused = await client.post("/jobs", json={"type": "thumbnail", "payload": {"x": 1}})
    assert refused.status_code == 422
    assert "it is not declared (jobqueue types add)" in refused.text

    declared, created = await jq.types.declare("thumbnail", payload_schema=None, by=BY)
    assert (declared.name, declared.payload_schema, created) == ("thumbnail", None, True)
    for body in ({"x": 1}, {}, {"anything": [1, "two", None]}):
        r = await client.post("/jobs", json={"type": "thumbnail", "payload": body})
        assert r.status_code == 201, r.text
    batch = {"jobs": [{"type": "thumbnail", "queue": "images"}, {"type": "noop"}]}
    assert (await client.post("/jobs/batch", json=batch)).status_code == 201
    assert await stored(db, schema) == ["thumbnail"] * 4 + ["noop"]


async def test_payloads_are_checked_against_the_declared_schema(
    jq: JobQueue, client: httpx.AsyncClient, db: asyncpg.Connection, schema: str
) -> None:
    await jq.types.declare("resize", payload_schema=RESIZE, by=BY)
    ok = await client.post("/jobs", json={"type": "resize", "payload": {"path": "a.png"}})
    assert ok.status_code == 201, ok.text

    bad = await client.post(
        "/jobs", json={"type": "resize", "payload": {"width": 0, "colour": "red"}}
    )
    assert bad.status_code == 422
    assert sorted((e["field"], e["msg"], e["type"]) for e in bad.json()["detail"]) == [
        ("payload", "'path' is a required property", "payload_schema"),
        (
            "payload",
            "Additional properties are not allowed ('colour' was unexpected)",
            "payload_schema",
        ),
        ("payload.width", "0 is less than the minimum of 1", "payload_schema"),
    ]
    batch = {"jobs": [{"type": "resize", "payload": {"path": "b"}}, {"type": "resize"}]}
    in_batch = await client.post("/jobs/batch", json=batch)
    assert in_batch.status_code == 422
    assert [e["loc"] for e in in_batch.json()["detail"]] == [["body", "jobs", 1, "payload"]]
    workflow = {"jobs": [{"ref": "a", "type": "resize", "payload": {"path": 7}}]}
    in_workflow = await client.post("/workflows", json=workflow)
    assert in_workflow.status_code == 422
    assert in_workflow.json()["detail"][0]["loc"] == ["body", "jobs", 0, "payload", "path"]
    assert await stored(db, schema) == ["resize"]  # the refused ones stored nothing


async def test_an_api_that_does_not_check_types_still_checks_declared_schemas(
    jq: JobQueue,
) -> None:
    """`jobqueue api` alone accepts any type (it does not know the workers' handlers),
    but a declared type's payloads are held to its schema all the same."""
    await jq.types.declare("resize", payload_schema=RESIZE, by=BY)
    app = create_app(jq, check_types=False)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as c:
        assert (await c.post("/jobs", json={"type": "elsewhere"})).status_code == 201
        r = await c.post("/jobs", json={"type": "resize", "payload": {"path": None}})
    assert r.status_code == 422
    assert r.json()["detail"][0]["msg"] == "None is not of type 'string'"


async def test_a_task_here_is_checked_by_its_own_payload_type_not_a_declaration(
    jq: JobQueue, client: httpx.AsyncClient
) -> None:
    await jq.types.declare(
        "send_email", payload_schema={"type": "object", "required": ["x"]}, by=BY
    )
    r = await client.post("/jobs", json={"type": "send_email", "payload": {"to": "a@b.c"}})
    assert r.status_code == 201, r.text


async def test_another_process_sees_a_change_within_the_refresh(
    jq: JobQueue, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API's view of the declared types is cached: a change made elsewhere (the CLI,
    another API process) counts once the cache is REFRESH_SECONDS old."""
    monkeypatch.setattr(job_types, "REFRESH_SECONDS", 0.0)
    async with JobQueue(settings=jq.settings) as elsewhere:
        await elsewhere.types.declare("resize", payload_schema=None, by=BY)
        assert (await client.post("/jobs", json={"type": "resize"})).status_code == 201
        await elsewhere.types.declare("resize", payload_schema=RESIZE, by=BY)
        assert (await client.post("/jobs", json={"type": "resize"})).status_code == 422
        assert await elsewhere.types.remove("resize", by=BY) is not None
        assert await elsewhere.types.remove("resize", by=BY) is None
    gone = await client.post("/jobs", json={"type": "resize", "payload": {"path": "a"}})
    assert gone.status_code == 422
    assert gone.json()["detail"][0]["type"] == "unknown_type"


async def test_a_schema_that_is_not_one_is_refused_and_nothing_stored(jq: JobQueue) -> None:
    with pytest.raises(SchemaError, match="not a JSON Schema at type"):
        await jq.types.declare("resize", payload_schema={"type": 5}, by=BY)
    with pytest.raises(SchemaError, match="not a JSON Schema at properties/a/minimum"):
        await jq.types.declare(
            "resize", payload_schema={"properties": {"a": {"minimum": "one"}}}, by=BY
        )
    assert await jq.types.list() == []


async def test_every_change_is_audited(jq: JobQueue) -> None:
    await jq.types.declare("resize", payload_schema=RESIZE, by=BY)
    await jq.types.declare("resize", payload_schema=None, by=BY)
    await jq.types.remove("resize", by=BY)
    await jq.types.remove("resize", by=BY)
    entries = await jq.inspect.audit_entries(actor=None, action=None, before_id=None, limit=10)
    assert [(e.action, e.target, e.result) for e in reversed(entries)] == [
        ("type.declare", "resize", "ok"),
        ("type.declare", "resize", "ok"),
        ("type.remove", "resize", "ok"),
        ("type.remove", "resize", "not_found"),
    ]


async def test_the_schema_keeps_its_cache_when_unchanged(jq: JobQueue) -> None:
    """Each refresh reuses the compiled validator of a type whose schema is unchanged."""
    await jq.types.declare("resize", payload_schema=RESIZE, by=BY)
    first = (await jq.types.checkers(["resize"]))["resize"]
    assert first.problems({"path": "a"}) == []
    jq.types._loaded_at = -1e9  # as if REFRESH_SECONDS had passed
    assert (await jq.types.checkers(["resize", "other"])) == {"resize": first}
