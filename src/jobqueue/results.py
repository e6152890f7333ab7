"""A handler's return value, as the JSON stored with its job.

Plain JSON values take the standard library's encoder; pydantic models, dataclasses,
datetimes and the like take pydantic's, loaded only when a handler returns one (a
worker otherwise never imports pydantic; see jobqueue.fields).
"""

from __future__ import annotations

import json
from typing import Any

# allow_nan=False: NaN is not JSON, and jsonb would refuse the whole batch's write.
_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


class ResultError(ValueError):
    """The return value cannot be stored: not JSON-serialisable, or too large."""


def encode(value: Any, max_bytes: int) -> str | None:
    """``value`` as JSON text, None for None. Raises ResultError."""
    if value is None:
        return None
    try:
        text = _JSON.encode(value)
    except (TypeError, ValueError):
        text = _pydantic_json(value)
    size = len(text.encode())
    if size > max_bytes:
        raise ResultError(
            f"result is {size} bytes; the limit is {max_bytes} (JOBQUEUE_MAX_RESULT_BYTES)"
        )
    return text


def _pydantic_json(value: Any) -> str:
    from pydantic_core import PydanticSerializationError, to_json

    try:
        return to_json(value, inf_nan_mode="null").decode()
    except PydanticSerializationError as exc:
        raise ResultError(f"result is not JSON-serialisable: {exc}") from None
