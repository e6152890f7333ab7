"""The limits of a queue, the rates they are written in ("100/m"), and the changes a
PATCH or a CLI call makes to them."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, ClassVar

PERIODS = {"s": 1, "m": 60, "h": 3600}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([smh])\s*$")
MAX_COUNT = 2_147_483_647  # the columns are integers

# The names a change may carry, as PATCH /queues/{name} takes them.
LIMIT_FIELDS = ("global_limit", "key_limit", "rate_limit", "key_rate_limit")


@dataclasses.dataclass(frozen=True, slots=True)
class Rate:
    """At most ``count`` starts in any ``seconds`` long window."""

    count: int
    seconds: int

    def __str__(self) -> str:
        for unit, size in reversed(PERIODS.items()):
            if self.seconds % size == 0:
                n = self.seconds // size
                return f"{self.count}/{unit}" if n == 1 else f"{self.count}/{n}{unit}"
        raise AssertionError("a period is a whole number of seconds")  # pragma: no cover


def parse_rate(text: str, field: str = "rate_limit") -> Rate:
    """``"100/m"`` (also ``/s``, ``/h``, and ``"5/10s"``) as a Rate; ValueError naming
    ``field`` otherwise."""
    found = _RATE.match(text) if isinstance(text, str) else None
    if found is None:
        raise ValueError(
            f"{field}: must be N/s, N/m or N/h (N starts per second, minute or hour; "
            f"N/10s for 10 seconds), got {text!r}"
        )
    count, multiple, unit = int(found[1]), int(found[2] or 1), found[3]
    if not 1 <= count <= MAX_COUNT or multiple < 1:
        raise ValueError(f"{field}: the count and the period must be at least 1, got {text!r}")
    return Rate(count, multiple * PERIODS[unit])


def check_count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise ValueError(f"{field}: must be an integer from 1 to {MAX_COUNT}, got {value!r}")
    return int(value)


@dataclasses.dataclass(frozen=True, slots=True)
class LimitChanges:
    """The limits a change sets: each named one to its value (None: removed); the others
    are kept."""

    values: Mapping[str, int | Rate | None]

    def as_json(self) -> dict[str, Any]:
        """For the SQL (queue_limits_set.sql) and the audit row: rates as "N/p"."""
        return {
            name: value if value is None or isinstance(value, int) else str(value)
            for name, value in self.values.items()
        }

    def columns(self) -> dict[str, Any]:
        """The columns to write, by name."""
        out: dict[str, Any] = {}
        for name, value in self.values.items():
            if name in ("rate_limit", "key_rate_limit"):
                prefix = "rate" if name == "rate_limit" else "key_rate"
                rate = value if isinstance(value, Rate) else None
                out[f"{prefix}_count"] = None if rate is None else rate.count
                out[f"{prefix}_period"] = None if rate is None else rate.seconds
            else:
                out[name] = value
        return out


def changes_from(given: Mapping[str, Any]) -> LimitChanges:
    """The changes ``given`` asks for (``{"global_limit": 5, "rate_limit": "10/s"}``;
    null removes a limit). ValueError naming the first field that is wrong."""
    if not given:
        raise ValueError(f"body: name at least one of {', '.join(LIMIT_FIELDS)}")
    values: dict[str, int | Rate | None] = {}
    for name, value in given.items():
        if name not in LIMIT_FIELDS:
            raise ValueError(f"{name}: not a limit; the limits are {', '.join(LIMIT_FIELDS)}")
        if value is None:
            values[name] = None
        elif name.endswith("rate_limit"):
            values[name] = value if isinstance(value, Rate) else parse_rate(value, name)
        else:
            values[name] = check_count(value, name)
    return LimitChanges(values)


@dataclasses.dataclass(frozen=True, slots=True)
class LimitsInfo:
    """A queue's limits as GET /queues shows them: each limit, how much of it is in use
    now, and how many due jobs wait only because of it."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {
        "json_schema_extra": {
            "examples": [
                {
                    "global_limit": 5,
                    "global_in_use": 5,
                    "global_waiting": 120,
                    "key_limit": 2,
                    "keys_at_limit": 3,
                    "key_waiting": 40,
                    "rate_limit": "100/m",
                    "rate_in_use": 61,
                    "rate_waiting": 0,
                    "key_rate_limit": None,
                }
            ]
        }
    }

    global_limit: int | None
    """At most this many of the queue's jobs run at once, across every worker."""
    global_in_use: int
    """The queue's jobs running now."""
    global_waiting: int
    """Due jobs that would start but for global_limit."""
    key_limit: int | None
    """At most this many jobs of one concurrency key run at once."""
    keys_at_limit: int
    """Keys with key_limit jobs running."""
    key_waiting: int
    """Due jobs whose key is at key_limit."""
    rate_limit: str | None
    """At most N starts in any window of the period ("100/m")."""
    rate_in_use: int
    """Starts within the period that ends now."""
    rate_waiting: int
    """Due jobs that would start but for rate_limit."""
    key_rate_limit: str | None
    """At most N starts of one key in any window of the period."""

    @classmethod
    def from_record(cls, r: Any) -> LimitsInfo:
        return cls(
            global_limit=r["global_limit"],
            global_in_use=r["global_in_use"],
            global_waiting=r["global_waiting"],
            key_limit=r["key_limit"],
            keys_at_limit=r["keys_at_limit"],
            key_waiting=r["key_waiting"],
            rate_limit=_rate_text(r["rate_count"], r["rate_seconds"]),
            rate_in_use=r["rate_in_use"],
            rate_waiting=r["rate_waiting"],
            key_rate_limit=_rate_text(r["key_rate_count"], r["key_rate_seconds"]),
        )


def _rate_text(count: int | None, seconds: int | None) -> str | None:
    return None if count is None or seconds is None else str(Rate(count, seconds))


def parse_entries(text: str) -> dict[str, dict[str, int | str | None]]:
    """JOBQUEUE_LIMITS: ``mail:global_limit=5,rate_limit=100/m;tenants:key_limit=2``, as
    the limits of each queue; ValueError naming what is wrong."""
    entries: dict[str, dict[str, int | str | None]] = {}
    for entry in filter(None, (e.strip() for e in text.split(";"))):
        queue, sep, limits = entry.partition(":")
        if not sep or not queue.strip() or not limits.strip():
            raise ValueError(f"{entry!r} is not QUEUE:LIMIT=VALUE[,LIMIT=VALUE...]")
        given: dict[str, int | str | None] = {}
        for pair in limits.split(","):
            name, eq, value = (part.strip() for part in pair.partition("="))
            if not eq:
                raise ValueError(f"{pair.strip()!r} in {entry!r} is not LIMIT=VALUE")
            counted = value.isdigit() and not name.endswith("rate_limit")
            given[name] = None if value.lower() == "none" else int(value) if counted else value
        changes_from(given)  # every name and value checked
        entries[queue.strip()] = given
    return entries
