"""The dashboard's browser, for its tests (tests/acceptance/test_dashboard*.py); a
`jobqueue api` to send requests to."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from tests.conftest import Spawn

CHROMIUM = "/usr/bin/chromium"

# How long an expectation waits for the page to show what it names. Playwright's
# default is 5 s; test_dashboard_schedules.py failed once on a loaded machine (two
# cores shared by the browser, the server, PostgreSQL and the suite) and passed
# alone, most likely an expectation waiting past it. A longer wait delays only a
# test that fails anyway.
expect.set_options(timeout=15_000)


@pytest.fixture
def browser(env: dict[str, str]) -> Iterator[Browser]:
    # Per test, after the schema is made (env): Playwright's sync API keeps an event
    # loop running in this thread, where the schema fixtures call asyncio.run.
    with sync_playwright() as p:
        # --no-sandbox: CI runs as root, where Chromium's sandbox cannot start.
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def base(spawn: Spawn, env: dict[str, str]) -> str:
    """A `jobqueue api` on this test's schema, up; its URL."""
    server = spawn(["api"], env, name="api")
    url = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(url)
    return url
