"""The dashboard (/ui) in a real Chromium, against a real `jobqueue serve`: counts,
live updates, a failing job's attempts and its retry, pausing a queue, what a
read-only token may see and do, CSRF, redaction, and a phone's width.

Each test saves screenshots under its tmp_path, and also under JOBQUEUE_SCREENSHOTS
if set (docs/images is filled that way). The browser fixture is in conftest.py; the
helpers here serve the other test_dashboard_*.py files too."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import httpx
import psycopg
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.conftest import Spawn, jobqueue

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def serve(env: dict[str, str], spawn: Spawn) -> str:
    env.update(
        JOBQUEUE_APP="dashboard_app:jq",
        RETRY_DELAY_SECONDS="0.2",
        JOBQUEUE_PROGRESS_INTERVAL="0.1",
        JOBQUEUE_RESCUE_INTERVAL="0.5",
        JOBQUEUE_SHUTDOWN_TIMEOUT="1",
    )
    base = f"http://127.0.0.1:{env['PORT']}"
    spawn(["serve"], env).wait_http(base)
    return base


def enqueue(
    base: str, type: str, payload: object, token: str | None = None, **fields: object
) -> int:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    answer = httpx.post(
        f"{base}/jobs", json={"type": type, "payload": payload, **fields}, headers=headers
    )
    assert answer.status_code == 201, answer.text
    job_id: int = answer.json()["id"]
    return job_id


def finished(base: str, job_id: int, token: str | None = None) -> dict[str, object]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    job: dict[str, object] = httpx.get(
        f"{base}/jobs/{job_id}", params={"wait": 30}, headers=headers, timeout=40
    ).json()
    return job


def shot(page: Page, tmp_path: Path, name: str, *, for_docs: bool = True) -> None:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=path, full_page=True)
    wanted = os.environ.get("JOBQUEUE_SCREENSHOTS")
    if wanted and for_docs:
        Path(wanted).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(wanted) / path.name)


def new_page(browser: Browser, viewport: dict[str, int] = DESKTOP, dark: bool = False) -> Page:
    context = browser.new_context(viewport=viewport, color_scheme="dark" if dark else "light")
    page = context.new_page()
    page.console_problems = []  # type: ignore[attr-defined]
    page.on(
        "console",
        lambda m: m.type == "error" and page.console_problems.append(m.text),  # type: ignore[attr-defined]
    )
    return page


def row(page: Page, queue: str, state: str) -> str:
    return page.locator(f'tr[data-queue="{queue}"] td[data-state="{state}"]').inner_text()


def test_the_queue_list_shows_the_jobs_waiting_for_a_handler(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    base = serve(env, spawn)
    for _ in range(2):  # a type no worker has a handler for: it waits, and says so
        forced = jobqueue(env, "enqueue", "typo_task", "{}", "--force")
        assert forced.returncode == 0, forced.stderr
    page = new_page(browser)
    page.goto(f"{base}/ui/")
    waiting = page.locator('tr[data-queue="default"] [data-unhandled]')
    expect(waiting).to_have_text("2 waiting for a handler")
    assert row(page, "default", "pending") == "2"
    shot(page, tmp_path, "dashboard-unhandled", for_docs=False)


def test_overview_counts_and_a_job_enqueued_over_http_turning_completed_live(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    base = serve(env, spawn)
    for i in range(3):
        assert finished(base, enqueue(base, "quick", {"n": i}))["status"] == "completed"
    assert httpx.post(f"{base}/queues/mail/pause").status_code == 200
    for i in range(2):
        enqueue(base, "quick", {"n": i}, queue="mail")

    page = new_page(browser)
    answer = page.goto(f"{base}/ui/")
    assert answer is not None
    policy = answer.headers["content-security-policy"]
    assert "unsafe-inline" not in policy
    assert "unsafe-eval" not in policy
    assert "frame-ancestors 'none'" in policy
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert (row(page, "default", "completed"), row(page, "default", "pending")) == ("3", "0")
    assert row(page, "mail", "pending").startswith("2")
    expect(page.locator('tr[data-queue="mail"] .badge')).to_have_text("paused")
    expect(page.locator('tr[data-queue="default"] .badge')).to_have_text("active")
    # Live: the count moves without a reload (the marker would be gone after one).
    page.evaluate("window.notReloaded = true")
    finished(base, enqueue(base, "quick", {"n": 4}))
    expect(page.locator('tr[data-queue="default"] td[data-state="completed"]')).to_have_text(
        "4", timeout=10_000
    )
    assert page.evaluate("window.notReloaded") is True

    page.goto(f"{base}/ui/jobs")
    page.evaluate("window.notReloaded = true")
    job_id = enqueue(base, "slow", {"steps": 8, "step_seconds": 0.25})
    badge = page.locator(f'tr[data-job="{job_id}"] .badge')
    expect(badge).to_be_visible(timeout=10_000)
    expect(badge).to_have_text("completed", timeout=15_000)
    assert page.evaluate("window.notReloaded") is True
    shot(page, tmp_path, "dashboard-jobs")

    # A job page follows the running job's progress, then its end.
    job_id = enqueue(base, "slow", {"steps": 20, "step_seconds": 0.25})
    page.goto(f"{base}/ui/jobs/{job_id}")
    page.evaluate("window.notReloaded = true")
    expect(page.locator("#progress-message")).to_contain_text("step", timeout=10_000)
    seen = page.locator("#progress-message").inner_text()
    expect(page.locator("#progress-message")).not_to_have_text(seen, timeout=10_000)
    expect(page.locator("#job-status")).to_have_text("completed", timeout=20_000)
    expect(page.locator("#result")).to_contain_text('"steps": 20')
    assert page.evaluate("window.notReloaded") is True

    # The leader writes a minute once it is over (tests/integration/test_series.py): an
    # older minute, written as it would be, stands for that wait here. Its sample is
    # marked taken: else the leader's next pass would sample it again, find none of its
    # jobs, and clear the waits before the page shows them.
    with psycopg.connect(env["DATABASE_URL"], autocommit=True) as conn:
        conn.execute(
            f"""INSERT INTO "{env["JOBQUEUE_SCHEMA"]}".queue_minutes
                    (minute, queue, completed, failed, wait_p50, wait_p95, waited)
                VALUES (date_trunc('minute', now()) - interval '5 minutes', 'default',
                        7, 2, 0.05, 0.4, true)"""
        )
    page.goto(f"{base}/ui/")
    expect(page.locator("svg.chart rect.failed")).to_have_count(1)
    summary = page.locator("svg.chart").first.get_attribute("aria-label") or ""
    counts = re.search(r"(\d+) completed and (\d+) failed over the last hour", summary)
    assert counts is not None, summary
    assert (int(counts[1]) >= 7, int(counts[2])) == (True, 2)
    expect(page.locator("svg.chart line.wait-p95").first).to_be_attached()
    shot(page, tmp_path, "dashboard-overview")
    page.get_by_role("link", name="Last day").click()
    expect(page.locator("svg.chart rect.completed").first).to_be_visible()
    page.goto(f"{base}/ui/workers")
    expect(page.locator(".badge.leader")).to_have_text("maintenance leader")
    page.goto(f"{base}/ui/cron")  # the former address of the schedules page
    expect(page.locator("table.schedules")).to_contain_text("0 3 * * *")
    assert page.console_problems == []  # type: ignore[attr-defined]  # no CSP violation


def test_a_failing_job_shows_both_attempts_and_retry_runs_it_again(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    base = serve(env, spawn)
    fixed = tmp_path / "fixed"
    job_id = enqueue(base, "flaky", {"fixed_when": fixed.name})
    assert finished(base, job_id)["status"] == "failed"

    page = new_page(browser)
    page.goto(f"{base}/ui/jobs/{job_id}")
    expect(page.locator("#job-status")).to_have_text("failed")
    for attempt in (1, 2):
        item = page.locator(f"#attempt-{attempt}")
        expect(item.locator(".error")).to_have_text(
            f"ConnectionError: mail server down (attempt {attempt})"
        )
        expect(item.locator("pre.traceback")).to_contain_text("Traceback (most recent call last)")
        expect(item.locator("pre.traceback")).to_contain_text(f"(attempt {attempt})")
        expect(item.locator("pre.log")).to_contain_text("checking the mail server")
    shot(page, tmp_path, "dashboard-failed-job")

    fixed.touch()
    page.get_by_role("button", name="Retry").click()
    expect(page.locator("#job-status")).to_have_text("completed", timeout=15_000)
    expect(page.locator("#result")).to_contain_text('"sent": "yes"')
    job = httpx.get(f"{base}/jobs/{job_id}").json()
    assert (job["status"], job["attempts"]) == ("completed", 1)
    # The two failed attempts of before the retry are still in the timeline.
    attempts = httpx.get(f"{base}/jobs/{job_id}/attempts").json()["attempts"]
    assert len([a for a in attempts if a["error"]]) == 2
    shot(page, tmp_path, "dashboard-retried-job", for_docs=False)
    # The click went through the API's route: the audit log has it, from the browser.
    entries = httpx.get(f"{base}/audit", params={"action": "job.retry"}).json()["entries"]
    assert [(e["target"], e["result"], e["client"]) for e in entries] == [
        (str(job_id), "ok", "127.0.0.1")
    ]
    page.goto(f"{base}/ui/audit")
    expect(page.locator("main")).to_contain_text("job.retry")


def test_pausing_a_queue_from_the_ui_stops_its_jobs_from_starting(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    env["JOBQUEUE_QUEUES"] = "default,other"
    base = serve(env, spawn)
    finished(base, enqueue(base, "quick", {}))
    page = new_page(browser)
    page.goto(f"{base}/ui/")
    page.get_by_role("button", name="Pause queue default").click()
    expect(page.locator('tr[data-queue="default"] .badge')).to_have_text("paused")
    assert httpx.get(f"{base}/queues").json()["queues"][0]["paused"] is True

    job_id = enqueue(base, "quick", {})
    # The worker goes on claiming from the other queue, five times over, and never
    # starts the paused queue's job.
    for i in range(5):
        assert finished(base, enqueue(base, "quick", {"n": i}, queue="other"))["status"] == (
            "completed"
        )
    assert httpx.get(f"{base}/jobs/{job_id}").json()["status"] == "pending"
    expect(page.locator('tr[data-queue="default"] td[data-state="pending"]')).to_have_text(
        "1", timeout=10_000
    )
    page.get_by_role("button", name="Resume queue default").click()
    expect(page.locator('tr[data-queue="default"] .badge')).to_have_text("active")
    assert finished(base, job_id)["status"] == "completed"
    completed = page.locator('tr[data-queue="default"] td[data-state="completed"]')
    expect(completed).to_have_text("2", timeout=10_000)

    # The Live switch: off, the page holds still (no stream at all); on, it catches up.
    page.get_by_label("Live").uncheck()
    expect(page.locator("main#main")).to_have_attribute("data-stream", "closed")
    finished(base, enqueue(base, "quick", {}))
    assert completed.inner_text() == "2"
    page.get_by_label("Live").check()
    expect(completed).to_have_text("3", timeout=10_000)


def make_token(env: dict[str, str], name: str, *scopes: str) -> str:
    args = [arg for scope in scopes for arg in ("--scope", scope)]
    made = jobqueue(env, "tokens", "create", "--name", name, *args, "--json")
    assert made.returncode == 0, made.stderr
    secret: str = json.loads(made.stdout)["secret"]
    return secret


def sign_in(page: Page, base: str, token: str) -> None:
    page.goto(f"{base}/ui/")
    assert page.url == f"{base}/ui/login"  # no session: to the sign-in form
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Queues")).to_be_visible()


def test_a_read_only_token_sees_no_buttons_and_its_posts_are_refused(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    admin = make_token(env, "ops", "admin")
    reader = make_token(env, "viewer", "jobs:read")
    base = serve(env, spawn)
    fixed = tmp_path / "never"
    job_id = enqueue(base, "flaky", {"fixed_when": fixed.name, "secret": "s3cr3t"}, admin)
    assert finished(base, job_id, admin)["status"] == "failed"

    page = new_page(browser)
    page.goto(f"{base}/ui/login")
    page.get_by_label("API token").fill("jqt_nope_nope")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("unknown token")

    sign_in(page, base, reader)
    cookie = next(c for c in page.context.cookies() if c["name"] == "jobqueue_session")
    assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (True, "Strict", "/ui")
    expect(page.locator('tr[data-queue="default"]')).to_be_visible()
    assert page.get_by_role("button", name="Pause queue default").count() == 0
    page.goto(f"{base}/ui/jobs/{job_id}")
    expect(page.locator("#job-status")).to_have_text("failed")
    assert page.get_by_role("button", name="Retry").count() == 0
    expect(page.locator("#payload")).to_contain_text("Hidden")
    assert "s3cr3t" not in page.content()
    expect(page.locator("#attempt-1")).to_contain_text("Log hidden")
    shot(page, tmp_path, "dashboard-read-only")
    page.goto(f"{base}/ui/jobs?status=failed")
    assert page.locator("input[type=checkbox][name=id]").count() == 0
    assert page.get_by_text("Retry all").count() == 0

    # A forged POST with the reader's cookie and a valid CSRF token: refused all the same.
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    assert csrf
    forged = page.request.post(f"{base}/ui/jobs/{job_id}/retry", form={"csrf": csrf})
    assert forged.status == 403
    forged = page.request.post(f"{base}/ui/queues/default/pause", form={"csrf": csrf})
    assert forged.status == 403
    assert httpx.get(f"{base}/jobs/{job_id}", headers=auth(admin)).json()["status"] == "failed"
    assert httpx.get(f"{base}/queues", headers=auth(admin)).json()["queues"][0]["paused"] is False

    page.get_by_role("button", name="Sign out").click()
    sign_in(page, base, admin)
    page.goto(f"{base}/ui/jobs/{job_id}")
    expect(page.get_by_role("button", name="Retry")).to_be_visible()
    expect(page.locator("#payload")).to_contain_text("s3cr3t")
    expect(page.locator("#attempt-1 pre.log")).to_contain_text("checking the mail server")
    # The admin's own cookie without the CSRF token, or with another one: refused.
    assert page.request.post(f"{base}/ui/jobs/{job_id}/retry", form={}).status == 403
    wrong = page.request.post(f"{base}/ui/jobs/{job_id}/retry", form={"csrf": csrf})
    assert wrong.status == 403  # the reader's token: CSRF tokens are per session
    assert httpx.get(f"{base}/jobs/{job_id}", headers=auth(admin)).json()["status"] == "failed"


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_phone_width_has_no_horizontal_scroll(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    base = serve(env, spawn)
    failed = enqueue(base, "flaky", {"fixed_when": "never"})
    assert finished(base, failed)["status"] == "failed"
    finished(base, enqueue(base, "quick", {"long": "x" * 300}))
    page = new_page(browser, PHONE, dark=True)
    for name, path in [
        ("overview", "/ui/"),
        ("jobs", "/ui/jobs"),
        ("job", f"/ui/jobs/{failed}"),
        ("workers", "/ui/workers"),
        ("queue", "/ui/queues/default"),
        ("schedules", "/ui/schedules"),
        ("bulk", "/ui/jobs/bulk?action=retry"),
    ]:
        page.goto(f"{base}{path}")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], (path, width)
        if name in ("overview", "job"):
            shot(page, tmp_path, f"dashboard-phone-{name}")


def test_retry_all_that_match_shows_the_count_first_and_cancel_selected(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    base = serve(env, spawn)
    fixed = tmp_path / "fixed"
    failed = [enqueue(base, "flaky", {"fixed_when": fixed.name}) for _ in range(3)]
    for job_id in failed:
        assert finished(base, job_id)["status"] == "failed"
    page = new_page(browser)
    page.goto(f"{base}/ui/jobs?status=failed")
    page.get_by_role("link", name="Retry all…").click()
    expect(page.locator("#bulk-count")).to_have_text("3")
    shot(page, tmp_path, "dashboard-confirm")
    assert all(httpx.get(f"{base}/jobs/{i}").json()["status"] == "failed" for i in failed)
    fixed.touch()
    page.get_by_role("button", name="Retry 3 jobs").click()
    expect(page.locator("#done")).to_have_text("3 jobs retried.")
    assert [finished(base, i)["status"] for i in failed] == ["completed"] * 3

    # Ticked in the list: only those.
    slow = [enqueue(base, "slow", {"steps": 100, "step_seconds": 0.1}) for _ in range(2)]
    page.goto(f"{base}/ui/jobs?type=slow")
    for job_id in slow:  # running, so that no claim is under way as it is cancelled
        expect(page.locator(f'tr[data-job="{job_id}"] .badge')).to_have_text("running")
    page.get_by_label(f"Select job {slow[0]}").check()
    page.get_by_role("button", name="Cancel selected").click()
    expect(page.locator("#done")).to_have_text("1 jobs cancelled or asked to stop.")
    assert finished(base, slow[0])["status"] == "cancelled"
    assert httpx.get(f"{base}/jobs/{slow[1]}").json()["status"] in ("pending", "running")
