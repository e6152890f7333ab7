"""The dashboard mounted in an application of one's own (`app.mount("/jobs",
jobqueue.ui.app(jq))`): its links and cookies follow the mount point, it needs a token
unless told otherwise, and its actions go through an HTTP API of its own."""

from __future__ import annotations

import dataclasses
import json
import re

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from jobqueue import ui
from jobqueue.app import JobQueue
from jobqueue.auth import tokens

pytestmark = pytest.mark.anyio


def client(app: FastAPI) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("192.0.2.9", 5000))
    return httpx.AsyncClient(transport=transport, base_url="http://app.test")


async def test_mounted_under_jobs_it_pauses_a_queue_and_wants_csrf(jq: JobQueue) -> None:
    await jq.enqueue("report", queue="mail")
    app = FastAPI()
    app.mount("/jobs", ui.app(jq, open_without_tokens=True))
    async with client(app) as browser:
        page = await browser.get("/jobs/")
        assert page.status_code == 200
        assert 'href="/jobs/queues/mail"' in page.text
        assert 'src="/jobs/static/ui.js"' in page.text
        assert "Path=/jobs" in page.headers["set-cookie"]
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
        assert csrf is not None

        refused = await browser.post("/jobs/queues/mail/pause", data={"next": "/"})
        assert refused.status_code == 403
        assert "CSRF" in refused.text
        assert not (await jq.queue("mail")).paused

        done = await browser.post("/jobs/queues/mail/pause", data={"csrf": csrf[1], "next": "/"})
        assert (done.status_code, done.headers["location"]) == (303, "/jobs/")
        assert (await jq.queue("mail")).paused


async def test_the_overview_shows_and_edits_a_queues_limits(jq: JobQueue) -> None:
    await jq.enqueue("report", queue="mail")
    app = FastAPI()
    app.mount("/jobs", ui.app(jq, open_without_tokens=True))
    async with client(app) as browser:
        page = await browser.get("/jobs/")
        assert 'action="/jobs/queues/mail/limits"' in page.text
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
        assert csrf is not None
        form = {"csrf": csrf[1], "next": "/", "global_limit": "4", "rate_limit": "10/s",
                "key_limit": "", "key_rate_limit": ""}  # fmt: skip
        done = await browser.post("/jobs/queues/mail/limits", data=form)
        assert (done.status_code, done.headers["location"]) == (303, "/jobs/")
        limits = (await jq.queue("mail")).limits
        assert limits is not None
        assert (limits.global_limit, limits.rate_limit, limits.key_limit) == (4, "10/s", None)
        page = await browser.get("/jobs/")
        assert "0 / 4 running" in page.text
        assert "0 / 10/s started" in page.text

        refused = await browser.post(
            "/jobs/queues/mail/limits", data={**form, "rate_limit": "10 a day"}
        )
        assert refused.status_code == 422
        assert "must be N/s, N/m or N/h" in refused.text
        unchanged = (await jq.queue("mail")).limits
        assert unchanged == limits
        forged = await browser.post("/jobs/queues/mail/limits", data={**form, "csrf": "x"})
        assert forged.status_code == 403


async def test_mounted_without_being_told_it_asks_for_a_token(jq: JobQueue) -> None:
    app = FastAPI()
    app.mount("/jobs", ui.app(jq))
    async with client(app) as browser:
        page = await browser.get("/jobs/")
        assert (page.status_code, page.headers["location"]) == (303, "/jobs/login")
        login = await browser.get("/jobs/login")
        assert 'name="token"' in login.text


async def test_the_job_page_links_its_trace_through_the_trace_url(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    jq.settings = dataclasses.replace(
        jq.settings, trace_url="https://tracing.example/trace/{trace_id}"
    )
    job = await jq.enqueue("report", {"to": "a@example.com"})
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    await db.execute(
        f'UPDATE "{schema}".jobs SET trace_context = $2::jsonb WHERE id = $1',
        job.id, json.dumps({"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"}),
    )  # fmt: skip
    app = FastAPI()
    app.mount("/jobs", ui.app(jq, open_without_tokens=True))
    async with client(app) as browser:
        page = (await browser.get(f"/jobs/jobs/{job.id}")).text
    assert f'href="https://tracing.example/trace/{trace_id}"' in page
    assert "&#34;to&#34;: &#34;a@example.com&#34;" in page  # the payload, formatted


async def test_a_bad_filter_is_a_422_naming_the_field(jq: JobQueue) -> None:
    app = FastAPI()
    app.mount("/jobs", ui.app(jq, open_without_tokens=True))
    async with client(app) as browser:
        for query, message in [
            ("status=lost", "status: unknown state &#39;lost&#39;"),
            ("since=yesterday", "since: not a date and time"),
            ("since=2026-12-02T00:00&until=2026-12-01T00:00", "until: must be after since"),
            ("after=-3", "after: not a job id"),
        ]:
            answer = await browser.get(f"/jobs/jobs?{query}")
            assert answer.status_code == 422, query
            assert message in answer.text, (query, answer.text)
        assert (await browser.get("/jobs/jobs?since=2026-12-01T00:00")).status_code == 200


async def test_a_token_restricted_to_a_queue_sees_and_touches_only_that_queue(
    jq: JobQueue,
) -> None:
    mail = await jq.enqueue("report", queue="mail")
    other = await jq.enqueue("report", queue="other")
    store = await jq.store()
    stored, secret = tokens.new_token(
        name="mail-ops", scopes=["jobs:read", "jobs:control", "queues:control"], queues=["mail"]
    )
    assert await store.token_create(token=stored, expires_in_seconds=None)
    app = FastAPI()
    app.mount("/jobs", ui.app(jq))
    async with client(app) as browser:
        login = await browser.get("/jobs/login")
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', login.text)
        assert csrf is not None
        signed = await browser.post("/jobs/login", data={"csrf": csrf[1], "token": secret})
        assert signed.status_code == 303
        overview = (await browser.get("/jobs/")).text
        assert 'data-queue="mail"' in overview
        assert 'data-queue="other"' not in overview
        listed = (await browser.get("/jobs/jobs")).text
        assert f'data-job="{mail.id}"' in listed
        assert f'data-job="{other.id}"' not in listed
        assert (await browser.get(f"/jobs/jobs/{other.id}")).status_code == 404

        page = (await browser.get(f"/jobs/jobs/{mail.id}")).text
        session_csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
        assert session_csrf is not None
        form = {"csrf": session_csrf[1], "next": "/"}
        assert (await browser.post("/jobs/queues/other/pause", data=form)).status_code == 403
        assert (await browser.post(f"/jobs/jobs/{other.id}/cancel", data=form)).status_code == 404
        assert (await browser.post(f"/jobs/jobs/{mail.id}/cancel", data=form)).status_code == 303
    assert not (await jq.queue("other")).paused
    states = [await jq.get(j.id) for j in (mail, other)]
    assert [j.status if j else None for j in states] == ["cancelled", "pending"]
