"""A durable job's page in a real Chromium: its steps, the attempt that recorded each,
their results and its checkpoint, hidden from a token without payloads:read; what a
waiting job waits for, and its children, each linking back to it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.acceptance.test_dashboard import (
    enqueue,
    finished,
    make_token,
    new_page,
    serve,
    shot,
    sign_in,
)
from tests.conftest import Spawn

pytestmark = pytest.mark.browser


def test_a_durable_jobs_page_lists_its_steps_and_checkpoint(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    admin = make_token(env, "ops", "admin")
    reader = make_token(env, "viewer", "jobs:read")  # no payloads:read
    base = serve(env, spawn)
    job_id = enqueue(base, "fulfil", {"order": 7}, admin)
    job = finished(base, job_id, admin)
    assert (job["status"], job["attempts"]) == ("completed", 2)
    assert [(s["name"], s["attempt"]) for s in job["steps"]] == [("charge", 1), ("label", 1)]  # type: ignore[attr-defined]

    page = new_page(browser)
    sign_in(page, base, admin)
    page.goto(f"{base}/ui/jobs/{job_id}")
    rows = page.locator("#steps tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("charge")
    expect(rows.nth(0)).to_contain_text('{"id": "ch-7"}')
    expect(rows.nth(1)).to_contain_text("label")
    expect(rows.nth(1)).to_contain_text('{"tracking": "1Z999"}')
    expect(page.locator("#checkpoint")).to_contain_text('{"shipped": 1}')
    expect(page.locator("#attempt-1 .error")).to_contain_text("the mail server hung up")
    shot(page, tmp_path, "dashboard-durable-job")

    # A token without payloads:read sees the steps, not what they returned.
    token = make_token(env, "reader", "jobs:read")
    reader = new_page(browser)
    sign_in(reader, base, token)
    reader.goto(f"{base}/ui/jobs/{job_id}")
    expect(reader.locator("#steps tbody tr")).to_have_count(2)
    expect(reader.locator("#steps")).not_to_contain_text("ch-7")
    expect(reader.locator("#checkpoint")).to_have_count(0)
    shown = httpx.get(f"{base}/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"}).json()
    assert [s["result"] for s in shown["steps"]] == [None, None]
    assert shown["checkpoint"] is None


def test_a_waiting_jobs_page_shows_its_wait_and_its_children(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    admin = make_token(env, "ops", "admin")
    base = serve(env, spawn)
    job_id = enqueue(base, "approve_and_pack", {"items": ["a", "b"]}, admin)
    headers = {"Authorization": f"Bearer {admin}"}

    page = new_page(browser)
    sign_in(page, base, admin)
    page.goto(f"{base}/ui/jobs/{job_id}")
    expect(page.locator("#waiting-for")).to_contain_text("the signal approved", timeout=15000)
    shot(page, tmp_path, "dashboard-durable-waiting")

    sent = httpx.post(
        f"{base}/signals", json={"name": "approved", "job_id": job_id}, headers=headers
    )
    assert sent.status_code == 201, sent.text
    job = finished(base, job_id, admin)
    assert (job["status"], job["result"]) == ("completed", ["box-a", "box-b"])
    page.goto(f"{base}/ui/jobs/{job_id}")
    children = page.locator("#children tbody tr")
    expect(children).to_have_count(2)
    expect(children.nth(0)).to_contain_text("box")
    expect(children.nth(0)).to_contain_text("completed")
    children.nth(0).get_by_role("link").click()
    expect(page.locator("#parent-link")).to_have_text(f"job {job_id}")
    page.locator("#parent-link").click()
    expect(page.locator("#children")).to_be_visible()
