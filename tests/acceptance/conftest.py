"""The dashboard's browser, for its tests (tests/acceptance/test_dashboard*.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, sync_playwright

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
