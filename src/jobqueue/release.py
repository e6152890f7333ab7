"""Which release this is: its version (semantic, CHANGELOG.md) and the schema it needs,
as `jobqueue --version`, GET /healthz and the jobqueue_build_info metric report them."""

from __future__ import annotations

import functools
import importlib.metadata


@functools.cache
def version() -> str:
    """The installed package's version, as pyproject.toml gives it."""
    try:
        return importlib.metadata.version("jobqueue")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout, not installed
        return "(not installed)"
