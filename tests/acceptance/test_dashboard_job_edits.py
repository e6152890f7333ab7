"""Job edits in a real browser against a real `jobqueue serve`: a scheduled job run now
from its page, one deleted from its page, and jobs ticked in the list deleted at once."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.acceptance.test_dashboard import enqueue, finished, new_page, serve
from tests.conftest import Spawn

pytestmark = pytest.mark.browser


def test_a_scheduled_job_is_run_now_or_deleted_and_ticked_ones_deleted_together(
    env: dict[str, str], spawn: Spawn, browser: Browser
) -> None:
    base = serve(env, spawn)
    later = enqueue(base, "quick", {"n": 1}, delay_seconds=3600)
    page = new_page(browser)
    page.goto(f"{base}/ui/jobs/{later}")
    page.get_by_role("button", name="Run now").click()
    assert finished(base, later)["status"] == "completed"  # a worker took it at once
    page.goto(f"{base}/ui/jobs/{later}")
    expect(page.get_by_role("button", name="Run now")).to_have_count(0)  # due already

    doomed = enqueue(base, "quick", {"n": 2}, delay_seconds=3600)
    page.goto(f"{base}/ui/jobs/{doomed}")
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    assert httpx.get(f"{base}/jobs/{doomed}").status_code == 404

    ticked = [enqueue(base, "quick", {"n": n}, delay_seconds=3600) for n in (3, 4)]
    kept = enqueue(base, "quick", {"n": 5}, delay_seconds=3600)
    page.goto(f"{base}/ui/jobs?status=scheduled")
    for job_id in ticked:
        page.locator(f'tr[data-job="{job_id}"] input[type="checkbox"]').check()
    page.get_by_role("button", name="Delete selected").click()
    expect(page.locator("main")).to_contain_text("2 jobs deleted.")
    assert [httpx.get(f"{base}/jobs/{j}").status_code for j in [*ticked, kept]] == [404, 404, 200]
    assert page.console_problems == []  # type: ignore[attr-defined]


def test_a_page_stops_refreshing_itself_once_it_sends_an_action(
    env: dict[str, str], spawn: Spawn, browser: Browser
) -> None:
    """Between an action's sending and the page that answers it, a refresh of the page
    would ask for what the action may have just removed: a deleted job's page, a 404 in
    the browser's console (which failed the test above once). The Delete form held back
    from leaving the page, the page's live stream closes as the form is sent."""
    base = serve(env, spawn)
    job_id = enqueue(base, "quick", {}, delay_seconds=3600)
    page = new_page(browser)
    page.goto(f"{base}/ui/jobs/{job_id}")
    main = page.locator("main#main")
    expect(main).to_have_attribute("data-stream", "open")
    page.evaluate("document.addEventListener('submit', (e) => e.preventDefault(), true)")
    page.get_by_role("button", name="Delete").click()
    expect(main).to_have_attribute("data-stream", "closed")
    assert httpx.get(f"{base}/jobs/{job_id}").status_code == 200  # nothing was sent
    assert page.console_problems == []  # type: ignore[attr-defined]
