"""The settings as people read them: each value spelled as its variable takes it, and
the table of docs/configuration.md, made from the settings themselves so that no
setting can be missing from it (scripts/settings-table writes it there; a test checks
that it is up to date)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from jobqueue import config

# The table sits between these lines of docs/configuration.md.
BEGIN = "<!-- settings table: written by scripts/settings-table; do not edit by hand -->"
END = "<!-- end of settings table -->"

_HEADER = "| variable | flag | default | meaning and trade-off |\n|---|---|---|---|\n"


def shown(value: Any) -> str:
    """A setting's value as its variable would spell it; ``unset`` for None."""
    if value is None:
        return "unset"
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, float):
        return f"{value:.15g}"
    return str(value)


def markdown_table() -> str:
    """A row per variable, in Settings' order, then the secrets, which have no flag."""
    names = [f.metadata["env"] for f in config.env_settings()]
    names += [v.env for v in config.SECRET_VARIABLES]
    rows = [
        (f"`{f.metadata['env']}`", f"`{config.flag_name(f)}`", _default(f), f.metadata["doc"])
        for f in config.env_settings()
    ]
    rows += [(f"`{v.env}`", "none", "unset", v.doc) for v in config.SECRET_VARIABLES]
    lines = [
        f"| {env} | {flag} | {default} | {_markdown(doc, names)} |"
        for env, flag, default, doc in rows
    ]
    return _HEADER + "\n".join(lines) + "\n"


def with_table(page: str) -> str:
    """``page`` (docs/configuration.md) with the table between its markers made anew."""
    before, begin, rest = page.partition(BEGIN + "\n")
    _, end, after = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"the page lacks the lines {BEGIN!r} and {END!r}")
    return before + begin + markdown_table() + end + after


def _default(f: dataclasses.Field[Any]) -> str:
    return "unset" if f.default is None else f"`{shown(f.default)}`"


def _markdown(doc: str, names: list[str]) -> str:
    """A setting's doc in a table cell: variables' names as code, ``|`` escaped."""
    parts = re.split(r"(`[^`]*`)", doc)  # what is code already stays as it is
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    for i in range(0, len(parts), 2):
        parts[i] = pattern.sub(r"`\1`", parts[i])
    return "".join(parts).replace("|", "\\|")
