"""What an operator tells apart in the dashboard (/ui), in a real Chromium against a
real `jobqueue serve`: a failed attempt's traceback from its handler's first frame."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.acceptance.test_dashboard import enqueue, finished, new_page, serve, shot
from tests.conftest import Spawn

pytestmark = pytest.mark.browser


def test_a_failed_attempt_shows_its_handlers_frames_and_the_full_traceback_a_click_away(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    base = serve(env, spawn)
    job_id = enqueue(base, "flaky", {"fixed_when": "never"})
    assert finished(base, job_id)["status"] == "failed"

    page = new_page(browser)
    page.goto(f"{base}/ui/jobs/{job_id}")
    attempt = page.locator("#attempt-1")
    shown = attempt.locator("pre.traceback")
    # It starts at the handler: no frame of jobqueue's executor, nor of the thread pool
    # the sync handler ran in, comes before it; a line says they were left out.
    expect(shown).to_contain_text("frames that ran the handler left out")
    expect(shown).to_contain_text('dashboard_app.py", line')
    expect(shown).to_contain_text("in flaky")
    expect(shown).to_contain_text("ConnectionError: mail server down (attempt 1)")
    assert "executor.py" not in shown.inner_text()
    assert "concurrent/futures" not in shown.inner_text()
    # The whole traceback is one click away.
    full = attempt.locator("pre.traceback-full")
    expect(full).to_be_hidden()
    attempt.get_by_text("Full traceback", exact=True).click()
    expect(full).to_be_visible()
    expect(full).to_contain_text("jobqueue/worker/executor.py")
    expect(full).to_contain_text("in flaky")
    shot(page, tmp_path, "dashboard-traceback")
    # What is stored, and what the API gives, is still the whole traceback.
    stored = httpx.get(f"{base}/jobs/{job_id}/attempts").json()["attempts"][0]["traceback"]
    assert "jobqueue/worker/executor.py" in stored
