"""The query files shipped with the package."""

from __future__ import annotations

from importlib import resources

from jobqueue.db.sql import QUERY_NAMES


def test_every_query_file_is_loaded() -> None:
    files = {
        f.name.removesuffix(".sql")
        for f in (resources.files("jobqueue.db") / "queries").iterdir()
        if f.name.endswith(".sql")
    }
    assert files == set(QUERY_NAMES)
