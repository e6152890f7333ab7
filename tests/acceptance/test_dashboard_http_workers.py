"""The dashboard's job page names the worker over HTTP that ran each attempt (its
token's name and its own, as GET /workers shows it), in a real browser against a real
`jobqueue serve`: a failed attempt by one worker, then a completed one by another that
logged; a job completed by a third that neither failed nor logged; and the Workers page
lists them."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.acceptance.test_dashboard import make_token, new_page, serve, shot, sign_in
from tests.conftest import Spawn, jobqueue

pytestmark = pytest.mark.browser


def test_the_job_page_names_the_http_worker_of_each_attempt(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    assert jobqueue(env, "types", "add", "resize").returncode == 0  # no worker runs it here
    worker_token = make_token(env, "images", "jobs:work", "jobs:enqueue")
    admin = make_token(env, "ops", "admin")
    base = serve(env, spawn)
    headers = {"Authorization": f"Bearer {worker_token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        job = {"type": "resize", "queue": "images", "payload": {"path": "a.png"}}
        job_id = client.post("/jobs", json=job).json()["id"]

        def claim(worker: str, job_id: int = job_id) -> str:
            answer = client.post("/claims", json={"worker": worker, "queues": ["images"]})
            [claimed] = answer.json()["jobs"]
            assert claimed["id"] == job_id
            lease: str = claimed["lease"]
            return lease

        first = claim("ts-1")
        error = {"type": "ResizeError", "message": "too wide"}
        failed = client.post(
            f"/jobs/{job_id}/fail", json={"lease": first, "error": error, "retry_in_seconds": 0}
        )
        assert failed.json()["status"] == "pending", failed.text
        second = claim("go-1")
        logged = client.post(f"/jobs/{job_id}/logs", json={"lease": second, "lines": ["resized"]})
        assert logged.status_code == 200, logged.text
        done = client.post(f"/jobs/{job_id}/complete", json={"lease": second, "result": {"w": 1}})
        assert done.json()["status"] == "completed", done.text

        quiet_id = client.post("/jobs", json=job).json()["id"]
        lease = claim("go-2", quiet_id)
        done = client.post(f"/jobs/{quiet_id}/complete", json={"lease": lease, "result": {}})
        assert done.json()["status"] == "completed", done.text

    page = new_page(browser)
    sign_in(page, base, admin)
    page.goto(f"{base}/ui/jobs/{job_id}")
    expect(page.locator("#job-status")).to_have_text("completed")
    first_attempt = page.locator("#attempt-1")
    expect(first_attempt.locator("h3")).to_contain_text("http:images:ts-1")
    expect(first_attempt.locator(".error")).to_have_text("ResizeError: too wide")
    second_attempt = page.locator("#attempt-2")
    expect(second_attempt.locator("h3")).to_contain_text("http:images:go-1")
    expect(second_attempt.locator("pre.log")).to_contain_text("resized")
    shot(page, tmp_path, "dashboard-http-worker-job", for_docs=False)

    page.goto(f"{base}/ui/jobs/{quiet_id}")
    expect(page.locator("#job-status")).to_have_text("completed")
    expect(page.locator("#attempt-1 h3")).to_contain_text("http:images:go-2")
    expect(page.locator("main dl.fields")).to_contain_text("http:images:go-2")

    page.goto(f"{base}/ui/workers")
    for name in ("http:images:ts-1", "http:images:go-1", "http:images:go-2"):
        expect(page.locator("main")).to_contain_text(name)
