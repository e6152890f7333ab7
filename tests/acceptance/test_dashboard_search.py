"""The jobs page's search box in a real browser against a real `jobqueue serve`: tag,
metadata and payload terms find their jobs, a tag is a link to its search, and a bad
term is a page that says what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.acceptance.test_dashboard import enqueue, new_page, serve, shot
from tests.conftest import Spawn

pytestmark = pytest.mark.browser


def rows(page: object) -> list[int]:
    return [int(r) for r in page.locator("tr[data-job]").evaluate_all(  # type: ignore[attr-defined]
        "rows => rows.map(r => r.dataset.job)")]  # fmt: skip


def test_the_search_box_finds_jobs_by_tag_metadata_and_payload(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    base = serve(env, spawn)
    acme = enqueue(base, "quick", {"user_id": 42}, tags=["import", "eu"],
                   meta={"customer": "acme corp"}, delay_seconds=3600)  # fmt: skip
    globex = enqueue(base, "quick", {"user_id": 7}, tags=["import"],
                     meta={"customer": "globex"}, delay_seconds=3600)  # fmt: skip
    enqueue(base, "quick", {"user_id": 42}, delay_seconds=3600)
    page = new_page(browser)
    page.goto(f"{base}/ui/jobs")
    search = page.get_by_label("Search")
    search.fill("tag:import")
    search.press("Enter")
    expect(page.locator("tr[data-job]")).to_have_count(2)
    assert rows(page) == [globex, acme]
    search = page.get_by_label("Search")
    search.fill('tag:import customer="acme corp" payload.user_id=42')
    search.press("Enter")
    expect(page.locator("tr[data-job]")).to_have_count(1)
    assert rows(page) == [acme]
    shot(page, tmp_path, "dashboard-search")

    page.locator(f'tr[data-job="{globex}"]').count()
    page.goto(f"{base}/ui/jobs/{acme}")
    expect(page.locator("#meta")).to_contain_text('"customer": "acme corp"')
    page.locator("#tags").get_by_role("link", name="eu").click()
    expect(page.locator("tr[data-job]")).to_have_count(1)
    assert rows(page) == [acme]

    assert page.console_problems == []  # type: ignore[attr-defined]

    # A term that is not one: the page says what is wrong, as a 422.
    answer = page.goto(f"{base}/ui/jobs?q=customer")
    assert answer is not None
    assert answer.status == 422
    expect(page.locator("main")).to_contain_text("is not a term")
