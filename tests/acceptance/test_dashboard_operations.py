"""What an operator tells apart in the dashboard (/ui), in a real Chromium against a
real `jobqueue serve`: a failed attempt's traceback from its handler's first frame,
jobs due later (scheduled, retrying) from jobs due now, a stale worker from a live
one and what each worker runs, and a queue's own page."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from playwright.sync_api import Browser, expect

from tests.acceptance.test_dashboard import enqueue, finished, new_page, serve, shot
from tests.conftest import Spawn

pytestmark = pytest.mark.browser


def until(what: str, check: Callable[[], Any], timeout: float = 30) -> Any:
    """Poll ``check`` until it returns something true; return that."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.1)
    return found


def job(base: str, job_id: int) -> dict[str, Any]:
    found: dict[str, Any] = httpx.get(f"{base}/jobs/{job_id}").json()
    return found


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
    # A live update swaps the page's content (another job ending moves the counters):
    # what the user opened stays open.
    before = page.locator("#main").get_attribute("data-updated") or ""
    assert finished(base, enqueue(base, "flaky", {"fixed_when": "never"}))["status"] == "failed"
    page.wait_for_function(
        "(before) => (document.getElementById('main').dataset.updated || '') !== before",
        arg=before,
    )
    expect(full).to_be_visible()
    expect(full).to_contain_text("jobqueue/worker/executor.py")
    expect(full).to_contain_text("in flaky")
    shot(page, tmp_path, "dashboard-traceback")
    # What is stored, and what the API gives, is still the whole traceback.
    stored = httpx.get(f"{base}/jobs/{job_id}/attempts").json()["attempts"][0]["traceback"]
    assert "jobqueue/worker/executor.py" in stored


def test_scheduled_and_retrying_jobs_are_told_apart_from_due_ones(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    env["JOBQUEUE_QUEUES"] = "default,mail"
    base = serve(env, spawn)
    scheduled = [enqueue(base, "quick", {"n": i}, delay_seconds=3600) for i in range(2)]
    retrying = enqueue(base, "unreachable", {})  # fails, then retries in an hour
    until("the failed job waits to retry", lambda: job(base, retrying)["last_error"])
    assert (job(base, retrying)["status"], job(base, retrying)["attempts"]) == ("pending", 1)
    done = enqueue(base, "quick", {})
    assert finished(base, done)["status"] == "completed"
    assert httpx.post(f"{base}/queues/mail/pause").status_code == 200
    due = enqueue(base, "quick", {}, queue="mail")  # due now, held by the pause

    page = new_page(browser)
    page.goto(f"{base}/ui/")
    default = page.locator('tr[data-queue="default"]')
    expect(default.locator('td[data-state="pending"]')).to_have_text("3")
    expect(default.locator('[data-state="scheduled"]')).to_have_text("2 scheduled")
    expect(default.locator('[data-state="retrying"]')).to_have_text("1 retrying")
    expect(page.locator('tr[data-queue="mail"] td.due-later')).to_have_text("none")

    default.get_by_role("link", name="2 scheduled").click()
    expect(page.get_by_label("State")).to_have_value("scheduled")
    rows = page.locator("table.jobs tbody tr")
    expect(rows).to_have_count(2)
    for job_id in scheduled:
        run_at = page.locator(f'tr[data-job="{job_id}"] td[data-label="Run at"]')
        expect(run_at).to_contain_text("from now")
        expect(run_at.locator(".badge")).to_have_text("scheduled")
    # A view by when jobs run cannot be a bulk action's filter: none is offered.
    assert page.get_by_text("Cancel all").count() == 0
    shot(page, tmp_path, "dashboard-scheduled")

    page.get_by_label("State").select_option("retrying")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    run_at = page.locator(f'tr[data-job="{retrying}"] td[data-label="Run at"]')
    expect(run_at).to_contain_text("from now")
    expect(run_at.locator(".badge")).to_have_text("retry")
    expect(page.locator(f'tr[data-job="{retrying}"] td.error')).to_have_text(
        "ConnectionError: crm unreachable"
    )

    page.get_by_label("State").select_option("due")
    page.get_by_label("Queue").select_option("mail")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    run_at = page.locator(f'tr[data-job="{due}"] td[data-label="Run at"]')
    expect(run_at).to_contain_text("ago")
    expect(run_at.locator(".badge")).to_have_text("due")

    # Every list has the column: a finished job shows when it last fell due.
    page.goto(f"{base}/ui/jobs?status=completed")
    expect(page.locator(f'tr[data-job="{done}"] td[data-label="Run at"]')).to_contain_text("ago")


def test_workers_page_lists_each_workers_running_jobs_and_marks_a_silent_one_stale(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    env["JOBQUEUE_LEASE_SECONDS"] = "2"  # stale after 2 s without a heartbeat
    base = serve(env, spawn)
    other = spawn(["worker"], {**env, "JOBQUEUE_QUEUES": "other"}, "other-worker")
    pid = other.popen.pid
    until("the other worker registers", lambda: pid in workers_pids(base))
    job_id = enqueue(base, "slow", {"steps": 400, "step_seconds": 0.1})
    worker_id = until("the job runs", lambda: job(base, job_id)["worker_id"])

    page = new_page(browser)
    page.goto(f"{base}/ui/workers")
    live = page.locator(f'tr[data-worker="{worker_id}"]')
    listed = live.locator(f'li[data-job="{job_id}"]')
    expect(listed).to_contain_text("slow")
    expect(listed).to_contain_text("default, started")
    expect(live.locator('td[data-label="Busy"]')).to_have_text("1")
    frozen = page.locator(f'tr[data-pid="{pid}"]')
    expect(frozen.locator('td[data-label="Running jobs"]')).to_have_text("none")
    expect(frozen.locator(".badge.stale")).to_have_count(0)

    os.kill(pid, signal.SIGSTOP)  # frozen: it stops heartbeating, and is not gone
    try:
        # The page refreshes by itself: the marker comes without a reload.
        page.evaluate("window.notReloaded = true")
        expect(frozen.locator(".badge.stale")).to_have_text("stale", timeout=20_000)
        assert page.evaluate("window.notReloaded") is True
        expect(live.locator(".badge.stale")).to_have_count(0)
        expect(live.locator(f'li[data-job="{job_id}"]')).to_be_visible()
        shot(page, tmp_path, "dashboard-workers")
        page.locator(f'tr[data-worker="{worker_id}"] li[data-job="{job_id}"] a').click()
        expect(page.locator("#job-status")).to_have_text("running")
    finally:
        os.kill(pid, signal.SIGCONT)


def workers_pids(base: str) -> set[int]:
    return {w["pid"] for w in httpx.get(f"{base}/workers").json()}


def test_a_queue_page_shows_its_counts_limits_throughput_and_waiting_jobs(
    env: dict[str, str], spawn: Spawn, browser: Browser, tmp_path: Path
) -> None:
    env["JOBQUEUE_QUEUES"] = "default,mail=4"
    base = serve(env, spawn)
    for i in range(2):
        assert finished(base, enqueue(base, "quick", {"n": i}, queue="mail"))["status"] == (
            "completed"
        )
    limits = {"global_limit": 3, "rate_limit": "100/m"}
    assert httpx.patch(f"{base}/queues/mail", json=limits).status_code == 200
    assert httpx.post(f"{base}/queues/mail/pause").status_code == 200
    later = enqueue(base, "quick", {}, queue="mail", delay_seconds=3600, priority=-5)
    low = enqueue(base, "quick", {}, queue="mail", priority=5)
    high = enqueue(base, "quick", {}, queue="mail", priority=1)
    # The leader writes the last hour's counts as it folds the counters: wait for it.
    schema = env["JOBQUEUE_SCHEMA"]
    with psycopg.connect(env["DATABASE_URL"], autocommit=True) as conn:
        until(
            "the completed jobs are in the per-minute counts",
            lambda: (
                conn.execute(
                    f"""SELECT sum(completed) FROM "{schema}".queue_minutes WHERE queue = 'mail'"""
                ).fetchone()
                == (2,)
            ),
        )

    page = new_page(browser)
    page.goto(f"{base}/ui/")
    page.locator('tr[data-queue="mail"]').get_by_role("link", name="mail", exact=True).click()
    assert page.url == f"{base}/ui/queues/mail"
    expect(page.get_by_role("heading", name="Queue mail")).to_be_visible()
    expect(page.locator("#queue-state")).to_have_text("paused")
    stats = {
        "pending": "3",
        "scheduled": "1",
        "retrying": "0",
        "running": "0",
        "completed": "2",
        "failed": "0",
        "completed-hour": "2",
        "failed-hour": "0",
    }
    for name, value in stats.items():
        expect(page.locator(f'[data-stat="{name}"]')).to_have_text(value)
    expect(page.locator('[data-limit="global"]')).to_have_text("0 / 3 running")
    expect(page.locator('[data-limit="rate"]')).to_contain_text("/ 100/m started")
    expect(page.locator('[data-limit="key"]')).to_have_text("none")
    expect(page.locator('[data-limit="worker"]')).to_contain_text("4 at once")
    expect(page.locator('[data-limit="paused"]')).to_contain_text("since")
    # Waiting: the due jobs in the order workers take them, then the one due later.
    waiting = page.locator("table.waiting tbody tr")
    expect(waiting).to_have_count(3)
    assert [int(r.get_attribute("data-job") or 0) for r in waiting.all()] == [high, low, later]
    expect(waiting.nth(2).locator('td[data-label="Run at"] .badge')).to_have_text("scheduled")
    expect(waiting.nth(0).locator('td[data-label="Run at"] .badge')).to_have_text("due")
    shot(page, tmp_path, "dashboard-queue")

    page.get_by_role("button", name="Resume queue mail").click()
    expect(page.locator("#queue-state")).to_have_text("active")
    assert page.url == f"{base}/ui/queues/mail"
    assert finished(base, high)["status"] == "completed"
    # A name no queue can have: no such page.
    assert page.request.get(f"{base}/ui/queues/no%20such").status == 404
