"""The Schedules page, in a real browser against a real `jobqueue serve`: a schedule
created, run now, paused, resumed, edited and deleted from its forms, a bad one
refused with the field named, and a schedule declared in code shown read-only."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.acceptance.test_dashboard import new_page, serve, shot
from tests.conftest import Spawn

pytestmark = pytest.mark.browser


def test_a_schedule_is_created_run_paused_edited_and_deleted_from_the_page(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    base = serve(env, spawn)
    # The leader writes the schedules declared in code as it takes the lead.
    deadline = time.monotonic() + 10
    while httpx.get(f"{base}/schedules/nightly").status_code != 200:
        assert time.monotonic() < deadline, "the code's schedule was not written"
        time.sleep(0.05)
    page = new_page(browser)
    page.goto(f"{base}/ui/schedules")
    # Declared in code by the app (a task's cron): shown, with no edit or delete.
    code = page.locator('tr[data-schedule="nightly"]')
    expect(code).to_contain_text("0 3 * * *")
    expect(code.get_by_role("button", name="Delete nightly")).to_have_count(0)

    form = page.get_by_role("form", name="New schedule")
    form.get_by_label("Name").fill("digest")
    form.get_by_label("Type").fill("quick")
    form.get_by_label("Cron").fill("0 7 * * 1-5")
    form.get_by_label("Time zone").fill("Europe/Berlin")
    form.get_by_label("Payload (JSON)").fill('{"to": "team"}')
    form.get_by_role("button", name="Create").click()
    row = page.locator('tr[data-schedule="digest"]')
    expect(row).to_contain_text("0 7 * * 1-5 Europe/Berlin")
    expect(row).to_contain_text('{"to": "team"}')

    row.get_by_role("button", name="Run digest now").click()
    row = page.locator('tr[data-schedule="digest"]')
    expect(row.get_by_role("link")).to_have_count(2)  # its job, and Edit
    job_id = httpx.get(f"{base}/schedules/digest").json()["last_job"]["id"]
    expect(row).to_contain_text(str(job_id))

    row.get_by_role("button", name="Pause digest").click()
    expect(page.locator('tr[data-schedule="digest"] .badge.paused')).to_have_text("paused")
    page.locator('tr[data-schedule="digest"]').get_by_role("button", name="Resume digest").click()
    expect(page.locator('tr[data-schedule="digest"] .badge.ok')).to_have_text("active")
    shot(page, tmp_path, "dashboard-schedules")

    page.locator('tr[data-schedule="digest"]').get_by_role("link", name="Edit digest").click()
    edit = page.get_by_role("form", name="Edit schedule")
    expect(edit.get_by_label("Cron")).to_have_value("0 7 * * 1-5")
    edit.get_by_label("Cron").fill("")
    edit.get_by_label("or every").fill("5m")
    edit.get_by_role("button", name="Save").click()
    expect(page.locator('tr[data-schedule="digest"]')).to_contain_text("every 5m")
    shown = httpx.get(f"{base}/schedules/digest").json()
    assert (shown["cron"], shown["every"], shown["payload"]) == (None, "5m", {"to": "team"})

    page.locator('tr[data-schedule="digest"]').get_by_role("button", name="Delete digest").click()
    expect(page.locator('tr[data-schedule="digest"]')).to_have_count(0)
    assert httpx.get(f"{base}/schedules/digest").status_code == 404

    assert page.console_problems == []  # type: ignore[attr-defined]  # no CSP violation

    # A bad one: the page says which field, and nothing is stored.
    form = page.get_by_role("form", name="New schedule")
    form.get_by_label("Name").fill("broken")
    form.get_by_label("Type").fill("quick")
    form.get_by_label("or every").fill("0s")
    form.get_by_role("button", name="Create").click()
    expect(page.locator("body")).to_contain_text("an interval is at least 1s")
    assert httpx.get(f"{base}/schedules/broken").status_code == 404
