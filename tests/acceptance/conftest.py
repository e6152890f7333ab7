"""The dashboard's browser, for its tests (tests/acceptance/test_dashboard*.py); a
`jobqueue api` to send requests to."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.conftest import Spawn

CHROMIUM = "/usr/bin/chromium"


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
