"""Tags, metadata and search over real HTTP against a real `jobqueue api`: tags and
metadata stored by POST /jobs, POST /jobs/batch and PATCH; GET /jobs filtering by them
and by the payload, a page at a time; bad filters a 422 naming the parameter."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.anyio


async def test_jobs_are_tagged_and_found_by_tag_meta_and_payload(base: str) -> None:
    async with httpx.AsyncClient(base_url=base) as client:

        async def found(query: str) -> list[int]:
            answer = await client.get(f"/jobs?{query}")
            assert answer.status_code == 200, answer.text
            return [j["id"] for j in answer.json()["jobs"]]

        made = await client.post("/jobs", json={
            "type": "imp", "payload": {"file": "a.csv", "user": {"id": 42}},
            "tags": ["import", "eu"], "meta": {"customer": "acme", "user_id": 42},
            "delay_seconds": 3600,
        })  # fmt: skip
        assert made.status_code == 201, made.text
        a: dict[str, Any] = made.json()
        assert (a["tags"], a["meta"]) == (["import", "eu"], {"customer": "acme", "user_id": 42})
        batch = await client.post("/jobs/batch", json={"jobs": [
            {"type": "imp", "payload": {"file": "b.csv"}, "tags": ["import"],
             "meta": {"customer": "globex"}},
            {"type": "other", "payload": {"file": "a.csv"}},
        ]})  # fmt: skip
        assert batch.status_code == 201, batch.text
        b, c = batch.json()["ids"]

        assert await found("tag=import") == [b, a["id"]]
        assert await found("tag=import&tag=eu") == [a["id"]]
        assert await found("meta.customer=acme") == [a["id"]]
        assert await found("meta.user_id=42") == [a["id"]]
        assert await found('meta.user_id="42"') == []
        assert await found("payload.file=a.csv") == [c, a["id"]]
        assert await found("payload.user.id=42&type=imp") == [a["id"]]
        answer = (await client.get("/jobs?payload.file=a.csv")).json()
        assert (answer["truncated"], answer["scan_limit"]) == (False, 10000)

        first = (await client.get("/jobs?limit=2")).json()
        assert [j["id"] for j in first["jobs"]] == [c, b]
        assert first["next_after"] == b
        rest = (await client.get(f"/jobs?limit=2&after={first['next_after']}")).json()
        assert ([j["id"] for j in rest["jobs"]], rest["next_after"]) == ([a["id"]], None)

        patched = await client.patch(f"/jobs/{a['id']}", json={"tags": [], "meta": {"k": 1}})
        assert patched.status_code == 200, patched.text
        assert (patched.json()["tags"], patched.json()["meta"]) == ([], {"k": 1})
        assert await found("tag=eu") == []


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("tags=import", "tags"),
        ("tag=" + "x" * 65, "tag"),
        ("meta.=1", "meta"),
        ("meta.a=1&meta.a=2", "meta"),
        ("payload.a.b=1&payload.a=2", "payload"),
    ],
)
async def test_a_bad_filter_is_a_422_naming_it(base: str, query: str, field: str) -> None:
    async with httpx.AsyncClient(base_url=base) as client:
        answer = await client.get(f"/jobs?{query}")
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["field"] == field


@pytest.mark.parametrize(
    "job",
    [
        {"tags": ["x"] * 17},
        {"tags": ["y" * 65]},
        {"tags": "import"},
        {"meta": {"big": "z" * 9000}},
        {"meta": [1]},
    ],
)
async def test_bad_tags_and_meta_are_a_422_with_nothing_stored(
    base: str, job: dict[str, Any]
) -> None:
    async with httpx.AsyncClient(base_url=base) as client:
        answer = await client.post("/jobs", json={"type": "t", **job})
        assert answer.status_code == 422, answer.text
        assert answer.json()["detail"][0]["field"].split(".")[0] in job
        assert (await client.get("/jobs")).json()["jobs"] == []
