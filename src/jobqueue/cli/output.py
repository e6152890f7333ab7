"""What the commands print: JSON for scripts, the same as the HTTP API answers, and
aligned tables for people.

jobqueue.encoding loads pydantic, so it is imported on the first JSON printed: a
``jobqueue worker`` process never prints any and never loads it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TypeAlias

from jobqueue.model.audit import AuditEntry
from jobqueue.model.job import Attempt, Job, QueueInfo, WorkerInfo

Record: TypeAlias = Job | Attempt | QueueInfo | WorkerInfo | AuditEntry

# Fields of a job that hold JSON of the application's own: shown as JSON, not as Python.
JSON_FIELDS = ("payload", "result", "progress", "checkpoint")


def print_json(value: object) -> None:
    print(json.dumps(value))


def print_record(record: Record) -> None:
    from jobqueue.encoding import to_json

    print(to_json(record).decode())


def print_records(records: Sequence[Record]) -> None:
    print_json([jsonable(r) for r in records])


def print_fields(job: Job, omit: Sequence[str] = ()) -> None:
    """One field a line, the names right-aligned; those in ``omit`` left out."""
    for key, value in jsonable(job).items():
        if key in omit:
            continue
        shown = json.dumps(value) if key in JSON_FIELDS else value
        print(f"{key:>19}: {shown}")


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> None:
    """The rows in columns under ``header``; ``empty`` alone when there are none."""
    if not rows:
        print(empty)
        return
    table = [header, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def format_time(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


def jsonable(record: Record) -> dict[str, object]:
    from jobqueue.encoding import to_jsonable

    fields: dict[str, object] = to_jsonable(record)
    return fields
