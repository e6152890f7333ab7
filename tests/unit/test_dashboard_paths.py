"""Where the dashboard sends a browser after an action: its own pages only, never a
path a browser would read as another site."""

from __future__ import annotations

import pytest

from jobqueue.ui.rendering import local


@pytest.mark.parametrize(
    ("target", "sent_to"),
    [
        ("/jobs/12", "/jobs/12"),
        ("/", "/"),
        ("//evil.example/x", "/fallback"),
        ("/\\evil.example", "/fallback"),
        ("https://evil.example/", "/fallback"),
        ("jobs", "/fallback"),
        ("", "/fallback"),
        (None, "/fallback"),
    ],
)
def test_only_local_paths_are_followed(target: str | None, sent_to: str) -> None:
    assert local(target, "/fallback") == sent_to
