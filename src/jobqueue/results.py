"""A handler's return value, as the JSON stored with its job.

Plain JSON values take the standard library's encoder; pydantic models, dataclasses,
datetimes and the like are made plain by pydantic, loaded only when a handler returns
one (a worker otherwise never imports pydantic; see jobqueue.model.fields).

A value jsonb would refuse is a ResultError, as one that is not JSON at all: NaN or
Infinity, a NUL character or half a surrogate pair. jsonb refusing one result would
fail the write of every outcome in its batch, again at each retry of it.
"""

from __future__ import annotations

from typing import Any

from jobqueue.model import fields, json_text


class ResultError(ValueError):
    """The return value cannot be stored: not JSON-serialisable, or too large."""


def encode(value: Any, max_bytes: int) -> str | None:
    """``value`` as JSON text, None for None. Raises ResultError."""
    if value is None:
        return None
    try:
        text = json_text.dumps(value)
    except TypeError:
        value = _plain(value)
        text = _encoded(value)
    except ValueError as exc:  # NaN or Infinity, or a value that holds itself
        raise _not_json(value, exc) from None
    # The encoder writes a NUL as \u0000 and half a surrogate pair as \udXXX: only a
    # result whose JSON holds one is walked (an emoji, a whole pair, is, and passes).
    if "\\u0000" in text or "\\ud" in text:
        try:
            fields.storable_json(value, "result")
        except ValueError as exc:
            raise ResultError(f"result cannot be stored: {exc}") from None
    size = len(text.encode())
    if size > max_bytes:
        raise ResultError(
            f"result is {size} bytes; the limit is {max_bytes} (JOBQUEUE_MAX_RESULT_BYTES)"
        )
    return text


def _plain(value: Any) -> Any:
    """``value`` as plain JSON values, by pydantic; NaN stays NaN (pydantic's own JSON
    would write null, and the job would seem to have returned what it did not)."""
    from pydantic_core import PydanticSerializationError, to_jsonable_python

    try:
        return to_jsonable_python(value)
    except PydanticSerializationError as exc:
        raise ResultError(f"result is not JSON-serialisable: {exc}") from None


def _encoded(plain: Any) -> str:
    try:
        return json_text.dumps(plain)
    except ValueError as exc:
        raise _not_json(plain, exc) from None


def _not_json(value: Any, exc: ValueError) -> ResultError:
    found = fields.unencodable(value, "result", exc)
    return ResultError(f"result is not JSON-serialisable: {found}")
