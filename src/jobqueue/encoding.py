"""JSON for the records users read (Job, WorkerInfo): the same text over HTTP and from
the CLI. pydantic serialises the dataclasses; it is loaded on first use, never by a
worker (see jobqueue.model.fields)."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def _adapter(kind: type) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(kind)
    if adapter is None:
        adapter = _ADAPTERS[kind] = TypeAdapter(kind)
    return adapter


def to_json(record: Any) -> bytes:
    """One Job or WorkerInfo as JSON."""
    return _adapter(type(record)).dump_json(record)


def to_jsonable(record: Any) -> Any:
    """One Job or WorkerInfo as JSON-ready Python values (datetimes as ISO 8601 text)."""
    return _adapter(type(record)).dump_python(record, mode="json")
