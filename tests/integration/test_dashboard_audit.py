"""The dashboard's Audit page shows the HTTP API's GET /audit, asked in-process with
the session's token and the browser's address, paged by its next_after."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request

from jobqueue import ui
from jobqueue.app import JobQueue
from jobqueue.audit import Actor

pytestmark = pytest.mark.anyio

ENTRIES = [
    {"id": 9, "at": "2026-12-01T10:00:02Z", "actor": "ops", "action": "jobs.retry",
     "target": "job 7", "filter": None, "count": 1, "client": "10.0.0.5", "result": "ok"},
    {"id": 8, "at": "2026-12-01T10:00:01Z", "actor": "ops", "action": "jobs.cancel_many",
     "target": None, "filter": {"queue": "mail"}, "count": 1200, "client": "10.0.0.5",
     "result": "ok"},
]  # fmt: skip


def fake_api(asked: list[dict[str, Any]]) -> FastAPI:
    api = FastAPI()

    @api.get("/audit")
    async def audit(request: Request) -> dict[str, Any]:
        asked.append(
            {
                "query": dict(request.query_params),
                "client": request.client.host if request.client else None,
                "authorization": request.headers.get("authorization"),
            }
        )
        after = request.query_params.get("after")
        if after is None:
            return {"entries": ENTRIES, "next_after": 8}
        return {"entries": [], "next_after": None}

    return api


async def page(app: FastAPI, path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, client=("192.0.2.7", 5000))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.get(path)


async def test_the_audit_page_shows_the_apis_entries_newest_first_and_pages(
    jq: JobQueue,
) -> None:
    asked: list[dict[str, Any]] = []
    api = fake_api(asked)
    api.mount("/ui", ui.app(jq, open_without_tokens=True, api=api))
    answer = await page(api, "/ui/audit")
    assert answer.status_code == 200
    html = answer.text
    assert html.index("jobs.retry") < html.index("jobs.cancel_many")
    assert "1200" in html
    assert '<code>{"queue": "mail"}</code>' in html  # the filter, as JSON
    assert 'href="/ui/audit?after=8"' in html
    assert asked[-1] == {"query": {"limit": "50"}, "client": "192.0.2.7", "authorization": None}

    older = await page(api, "/ui/audit?after=8")
    assert "Nothing recorded yet" in older.text
    assert asked[-1]["query"] == {"limit": "50", "after": "8"}


async def test_without_an_audit_api_the_page_says_so(jq: JobQueue) -> None:
    bare = FastAPI()
    bare.mount("/ui", ui.app(jq, open_without_tokens=True, api=bare))
    assert "keeps no audit log" in (await page(bare, "/ui/audit")).text


async def test_mounted_alone_it_shows_the_real_audit_log(jq: JobQueue) -> None:
    alone = FastAPI()
    alone.mount("/ui", ui.app(jq, open_without_tokens=True))
    job = await jq.enqueue("noop", {})
    await jq.cancel(job.id, by=Actor("nightly-cleanup"))
    html = (await page(alone, "/ui/audit")).text
    assert "job.cancel" in html
    assert "nightly-cleanup" in html
