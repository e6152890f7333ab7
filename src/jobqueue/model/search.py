"""Finding jobs (docs/search.md): the filters that GET /jobs, ``JobQueue.list``, the
CLI's ``jobs list`` and the dashboard's search box share, read from their text, and
the page of jobs they find.

Tags and metadata are indexed (migration 0030), so a filter on them is answered from
the index at any size of the table. The payload is not: a payload filter reads the
newest jobs that match the other filters, at most ``PAYLOAD_SCAN_ROWS`` of them, and a
page that stopped there says so (``truncated``) with the cursor to read on from.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from jobqueue.model import fields
from jobqueue.model.job import Job, JobStatus

# How many jobs a payload filter reads, newest first, before it answers with what it
# found. 10,000 rows take about 10 ms to read; a search that must reach further pages
# on with the cursor it is given, so no request holds the database for long.
PAYLOAD_SCAN_ROWS = 10_000
# Fewer jobs than this carry a filter's tags and metadata: the search reads them by
# their ids, from the indexes, rather than the newest jobs first until it has a page
# (jobs_search.sql). 1,000 jobs fetched by id take about 2 ms.
FEW_LABELLED = 1000
# Terms of one filter at most: each is a condition the database evaluates per row.
MAX_TERMS = 16


@dataclasses.dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs: each condition given must hold (None: any)."""

    status: JobStatus | None = None
    types: Sequence[str] | None = None
    queues: Sequence[str] | None = None
    tags: Sequence[str] | None = None
    """Jobs that carry all of these tags."""
    meta: Mapping[str, Any] | None = None
    """Jobs whose metadata contains this object (``{"customer": "acme"}``)."""
    payload: Mapping[str, Any] | None = None
    """Jobs whose payload contains this object; read within PAYLOAD_SCAN_ROWS."""
    created_since: datetime | None = None
    created_before: datetime | None = None
    due: str | None = None
    """Pending jobs by when they run: "due", "scheduled" or "retrying"."""


@dataclasses.dataclass(frozen=True, slots=True)
class JobPage:
    """A page of jobs, newest first."""

    jobs: list[Job]
    next_after: int | None
    """The cursor of the next page (``after``); None when there is none."""
    truncated: bool = False
    """A payload filter read PAYLOAD_SCAN_ROWS jobs and stopped: older jobs may match
    too, from ``next_after`` on."""


def value_of(text: str) -> Any:
    """A filter's value: a JSON number, ``true``, ``false`` or ``null`` as that value,
    a double-quoted JSON string as its text, anything else as the text it is. So
    ``user_id=42`` finds the number 42, and ``user_id="42"`` the string."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, float) and not math.isfinite(value):
        return text  # NaN and Infinity, which Python's parser reads and JSON lacks
    if isinstance(value, str) and not text.startswith('"'):
        return text
    return value if value is None or isinstance(value, bool | int | float | str) else text


def containment(terms: Iterable[tuple[str, str]], field: str) -> dict[str, Any] | None:
    """The JSON object that a value must contain to match every ``(path, value)``
    term; a dotted path reaches into nested objects (``user.plan=pro``). None for no
    terms. ValueError names ``field`` for a path given twice or an empty one."""
    found: dict[str, Any] = {}
    count = 0
    for path, text in terms:
        count += 1
        keys = path.split(".")
        if not all(keys):
            raise ValueError(f"{field}: {path!r} is not a key or a dotted path of keys")
        into = found
        for key in keys[:-1]:
            into = into.setdefault(key, {})
            if not isinstance(into, dict):
                raise ValueError(f"{field}: {path!r} is given twice")
        if keys[-1] in into:
            raise ValueError(f"{field}: {path!r} is given twice")
        into[keys[-1]] = value_of(text)
        fields.storable_json(into[keys[-1]], f"{field}.{path}")
    if count > MAX_TERMS:
        raise ValueError(f"{field}: at most {MAX_TERMS} terms, got {count}")
    return found or None


def check_tags(tags: Sequence[str] | None) -> list[str] | None:
    """Tags to filter by, as a job's tags are checked (ValueError naming ``tag``)."""
    try:
        return fields.check_tags(tags)
    except ValueError as exc:
        raise ValueError(str(exc).replace("tags:", "tag:", 1)) from None


@dataclasses.dataclass(frozen=True, slots=True)
class Terms:
    """What a search box holds: tags, metadata terms and payload terms."""

    tags: list[str]
    meta: dict[str, Any] | None
    payload: dict[str, Any] | None


# A word of a search box: runs of anything but spaces and quotes, and quoted strings
# (JSON's, so that a quoted value is read as a JSON string by value_of).
_WORD = re.compile(r'(?:[^\s"]+|"(?:[^"\\]|\\.)*")+')
SEARCH_SYNTAX = "tag:NAME, KEY=VALUE (metadata) or payload.KEY=VALUE"


def parse_terms(text: str) -> Terms:
    """The terms of a search box, separated by spaces: ``tag:import`` (``tag:a,b``
    for several), ``customer=acme`` or ``meta.customer=acme`` (metadata), and
    ``payload.user_id=42``; a value with spaces in double quotes. ValueError says
    what is wrong."""
    words = _WORD.findall(text)
    if _WORD.sub("", text).strip():
        raise ValueError("search: a double quote is not closed")
    tags: list[str] = []
    meta: list[tuple[str, str]] = []
    payload: list[tuple[str, str]] = []
    for word in words:
        name, colon, rest = word.partition(":")
        if colon and name in ("tag", "tags"):
            tags.extend(t.strip('"') for t in rest.split(",") if t)
            continue
        path, equals, value = word.partition("=")
        if not equals or not path:
            raise ValueError(f"search: {word!r} is not a term; use {SEARCH_SYNTAX}")
        if path.startswith("payload."):
            payload.append((path.removeprefix("payload."), value))
        else:
            meta.append((path.removeprefix("meta."), value))
    return Terms(
        check_tags(tags) or [],
        containment(meta, "meta"),
        containment(payload, "payload"),
    )
