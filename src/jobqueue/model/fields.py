"""The rules a new job's options obey, in one place.

Two checkers read them: ``jobqueue.enqueue.new_job.NewJob`` (pydantic, for HTTP, with errors
and an OpenAPI schema per field) and :func:`check_options` (plain Python, for
``JobQueue.task`` and ``JobQueue.enqueue``). The plain one exists so that a worker
process never loads pydantic: it costs about 10 MiB of memory per process.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from jobqueue.model import json_text

QUEUE_PATTERN = r"^[A-Za-z0-9_.:-]{1,100}$"
TYPE_MAX_LENGTH = 200
# PostgreSQL integer bounds, so that an out-of-range value is a clear error, not a
# database error.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
MAX_ATTEMPTS_LIMIT = 1000
MAX_DELAY_SECONDS = 10 * 365 * 86400
UNIQUE_KEY_MAX_LENGTH = 255
CONCURRENCY_KEY_MAX_LENGTH = 255
# Tags and metadata (docs/search.md): small, as they are stored, indexed and shown with
# every job that has them.
TAGS_MAX = 16
TAG_MAX_LENGTH = 64
META_MAX_BYTES = 8192

# json_text.dumps, keeping text as it is (UTF-8 for jsonb): a lone surrogate then fails
# the encoding to UTF-8, where ensure_ascii would have escaped it out of sight.
_JSON_TEXT = json_text.Encoder(ensure_ascii=False)

_QUEUE = re.compile(QUEUE_PATTERN)


def storable(text: str) -> str:
    """``text`` if PostgreSQL can store it; ValueError if it holds a NUL character or
    half of a UTF-16 surrogate pair (JSON can spell both; neither is text to
    PostgreSQL, which would refuse the whole statement)."""
    if "\x00" in text:
        raise ValueError("must not contain the NUL character (\\u0000)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must not contain half of a surrogate pair (\\ud800-\\udfff)") from None
    return text


def storable_json(value: Any, path: str = "") -> Any:
    """``value`` if every string in it, keys included, is ``storable``, and every number
    is one JSON has; ValueError names the first that is not by its path (``a.b.0``)."""
    if isinstance(value, str):
        try:
            storable(value)
        except ValueError as exc:
            raise ValueError(f"{path or 'value'}: {exc}") from None
    elif isinstance(value, float) and not math.isfinite(value):
        # Python's JSON parser reads NaN and Infinity; jsonb refuses them.
        raise ValueError(f"{path or 'value'}: {value} is not a JSON number")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            storable_json(key, f"{path}.{key!r}".lstrip("."))
            storable_json(item, f"{path}.{key}".lstrip("."))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            storable_json(item, f"{path}.{i}".lstrip("."))
    return value


def unencodable(value: Any, path: str, exc: ValueError) -> ValueError:
    """The error to raise for ``value``, which the JSON encoder refused with ``exc``
    (allow_nan=False): the first number JSON does not have, or text PostgreSQL cannot
    store, named by its path from ``path``; else ``exc`` itself (a circular value)."""
    if "Out of range float" in str(exc):
        try:
            storable_json(value, path)
        except ValueError as found:
            return found
    return exc


def check_type(type: Any) -> str:
    """The job type, stripped of surrounding whitespace; ValueError names the field."""
    if not isinstance(type, str) or not 1 <= len(type.strip()) <= TYPE_MAX_LENGTH:
        raise ValueError(f"type: must be a non-empty string of at most {TYPE_MAX_LENGTH} "
                         f"characters, got {type!r}")  # fmt: skip
    return type.strip()


def check_queue_name(queue: str) -> str:
    """The queue name as it is; ValueError if no job could be in such a queue."""
    if not _QUEUE.match(queue):
        raise ValueError(f"a queue name must match {QUEUE_PATTERN}, got {queue!r}")
    return queue


# What an enqueue under a held unique key does (docs/unique-jobs.md): answer with the
# holder; replace a pending holder's payload, priority and run time; or debounce it.
ON_CONFLICT = ("return", "replace", "debounce")


def check_options(
    *,
    payload: Any = None,
    queue: Any = None,
    priority: Any = None,
    max_attempts: Any = None,
    run_at: Any = None,
    delay_seconds: Any = None,
    unique_key: Any = None,
    unique_for: Any = None,
    on_conflict: Any = None,
    concurrency_key: Any = None,
    tags: Any = None,
    meta: Any = None,
) -> tuple[list[str] | None, str | None]:
    """Raise ValueError, naming the field, for the first option that breaks a rule.
    The tags and metadata as stored (``check_tags``, ``meta_json``): checking them
    makes them, and an enqueue stores what its check made."""
    if payload is not None and not isinstance(payload, Mapping):
        raise ValueError(f"payload: must be a mapping (a JSON object), got {payload!r}")
    if queue is not None and not (isinstance(queue, str) and _QUEUE.match(queue)):
        raise ValueError(f"queue: must match {QUEUE_PATTERN}, got {queue!r}")
    if priority is not None and not _is_int_in(priority, INT32_MIN, INT32_MAX):
        raise ValueError(f"priority: must be an integer from {INT32_MIN} to {INT32_MAX}, "
                         f"got {priority!r}")  # fmt: skip
    if max_attempts is not None and not _is_int_in(max_attempts, 1, MAX_ATTEMPTS_LIMIT):
        raise ValueError(f"max_attempts: must be an integer from 1 to {MAX_ATTEMPTS_LIMIT}, "
                         f"got {max_attempts!r}")  # fmt: skip
    if run_at is not None and not (isinstance(run_at, datetime) and run_at.tzinfo is not None):
        raise ValueError(f"run_at: must be a datetime with a time zone, got {run_at!r}")
    if delay_seconds is not None and not _is_seconds(delay_seconds):
        raise ValueError(f"delay_seconds: must be a finite number from 0 to "
                         f"{MAX_DELAY_SECONDS}, got {delay_seconds!r}")  # fmt: skip
    if run_at is not None and delay_seconds is not None:
        raise ValueError("run_at, delay_seconds: give run_at or delay_seconds, not both")
    if unique_key is not None and not (
        isinstance(unique_key, str) and 1 <= len(unique_key) <= UNIQUE_KEY_MAX_LENGTH
    ):
        raise ValueError(f"unique_key: must be a string of 1 to {UNIQUE_KEY_MAX_LENGTH} "
                         f"characters, got {unique_key!r}")  # fmt: skip
    if unique_for is not None and not _is_seconds(unique_for):
        raise ValueError(f"unique_for: must be a finite number of seconds from 0 to "
                         f"{MAX_DELAY_SECONDS}, got {unique_for!r}")  # fmt: skip
    if unique_for is not None and unique_key is None:
        raise ValueError("unique_for: needs a unique_key")
    if on_conflict is not None and on_conflict not in ON_CONFLICT:
        raise ValueError(f"on_conflict: must be one of {', '.join(ON_CONFLICT)}, "
                         f"got {on_conflict!r}")  # fmt: skip
    if on_conflict not in (None, "return") and unique_key is None:
        raise ValueError("on_conflict: needs a unique_key")
    if on_conflict == "debounce" and delay_seconds is None:
        raise ValueError("on_conflict: debounce needs delay_seconds (the quiet time)")
    if concurrency_key is not None:
        check_concurrency_key(concurrency_key)
    return check_tags(tags), meta_json(meta)


def check_tags(tags: Any) -> list[str] | None:
    """A job's tags as stored: each once, in the order given; None for none. ValueError
    names the field unless they are a list of at most 16 strings of 1 to 64 characters."""
    if not tags:
        if tags is None or (isinstance(tags, Sequence) and not isinstance(tags, str | bytes)):
            return None
        raise ValueError(f"tags: must be a list of strings, got {tags!r}")
    # A list of plain strings, as nearly every enqueue gives, is checked in C: joined,
    # the text PostgreSQL must store is searched once (every tagged enqueue runs this).
    if (
        type(tags) is list
        and len(tags) <= TAGS_MAX
        and all([type(t) is str and 0 < len(t) <= TAG_MAX_LENGTH for t in tags])
        and "\x00" not in (joined := "".join(tags))
        and joined.isascii()
    ):
        return list(dict.fromkeys(tags))
    if isinstance(tags, str | bytes) or not isinstance(tags, Sequence):
        raise ValueError(f"tags: must be a list of strings, got {tags!r}")
    if len(tags) > TAGS_MAX:
        raise ValueError(f"tags: at most {TAGS_MAX}, got {len(tags)}")
    for tag in tags:
        if not (isinstance(tag, str) and 1 <= len(tag) <= TAG_MAX_LENGTH):
            raise ValueError(f"tags: each must be a string of 1 to {TAG_MAX_LENGTH} "
                             f"characters, got {tag!r}")  # fmt: skip
        try:
            storable(tag)
        except ValueError as exc:
            raise ValueError(f"tags: {tag!r} {exc}") from None
    return list(dict.fromkeys(tags))


def meta_json(meta: Any) -> str | None:
    """A job's metadata as the JSON text to store; None for none (or an empty object).
    ValueError names the field unless it is a JSON object of at most 8 KiB."""
    if meta is None:
        return None
    if type(meta) is not dict and not isinstance(meta, Mapping):
        raise ValueError(f"meta: must be a mapping (a JSON object), got {meta!r}")
    if not meta:
        return None
    # Encoded first, in C: the walk that names what PostgreSQL cannot store runs only
    # when the encoding fails or the text holds an escaped NUL (every enqueue with
    # metadata does this, and the walk was a third of such an enqueue's CPU).
    try:
        text = _JSON_TEXT.encode(meta)
        # UnicodeEncodeError (a ValueError): a lone surrogate, which ASCII text holds none of
        size = len(text) if text.isascii() else len(text.encode())
    except (TypeError, ValueError) as exc:
        storable_json(meta, "meta")
        raise ValueError(f"meta: {exc}") from None
    if "\\u0000" in text:  # NUL, or text that spells it: the walk tells them apart
        storable_json(meta, "meta")
    if size > META_MAX_BYTES:
        raise ValueError(f"meta: is {size} bytes as JSON; the limit is {META_MAX_BYTES}")
    return text


def _is_int_in(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _is_seconds(value: Any) -> bool:
    # NaN compares false with every bound, so that it would otherwise read "out of
    # range"; the message says "finite" for it and for Infinity.
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= MAX_DELAY_SECONDS
    )


def check_concurrency_key(key: Any, field: str = "concurrency_key") -> str | None:
    """A job's concurrency key as stored: text of 1 to 255 characters; a payload
    field's number is taken as its text. ValueError naming ``field`` otherwise."""
    if key is None:
        return None
    if isinstance(key, int) and not isinstance(key, bool):
        key = str(key)
    if not isinstance(key, str) or not 1 <= len(key) <= CONCURRENCY_KEY_MAX_LENGTH:
        raise ValueError(
            f"{field}: must be text of 1 to {CONCURRENCY_KEY_MAX_LENGTH} characters "
            f"(or an integer), got {key!r}"
        )
    try:
        return storable(key)
    except ValueError as exc:
        raise ValueError(f"{field}: {exc}") from exc
