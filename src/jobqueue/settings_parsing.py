"""The parsers of settings: each turns the text of a flag or an environment variable
into its setting's value, or raises ConfigError with one line that names the setting
and the value.

Apart from jobqueue.config, which names each setting's parser, so that its Settings
read as one catalogue of what a process can be told. The few values read outside
Settings (``--processes``, ``tokens create --expires``, a worker's queues) are parsed
by these same functions, so they are refused in the same words.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Sequence


class ConfigError(ValueError):
    """A setting has a value that cannot be used; the message is one line."""


def positive_int(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {raw!r}")
    return value


def pool_size(name: str, raw: str) -> int | None:
    """A positive number of connections, or None for "auto" (see Settings.pool_size)."""
    if raw.strip().lower() == "auto":
        return None
    return positive_int(name, raw)


def port_number(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise ConfigError(f"{name} must be a port number from 0 to 65535, got {raw!r}")
    return value


def optional_port(name: str, raw: str) -> int | None:
    if raw.strip().lower() in ("", "none"):
        return None
    return port_number(name, raw)


def positive_seconds(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"{name} must be a positive number of seconds, got {raw!r}")
    return value


def non_negative_seconds(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ConfigError(f"{name} must be a number of seconds >= 0, got {raw!r}")
    return value


def optional_seconds(name: str, raw: str) -> float | None:
    if raw.strip().lower() in ("", "none", "0"):
        return None
    return positive_seconds(name, raw)


UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def retention(name: str, raw: str) -> float | None:
    """A duration such as ``86400``, ``90m``, ``24h`` or ``7d``; ``forever``: keep."""
    if raw.strip().lower() in ("forever", "never"):
        return None
    return duration(name, raw, or_forever=True)


def duration(name: str, raw: str, *, or_forever: bool = False) -> float:
    """A duration such as ``86400``, ``90m``, ``24h`` or ``7d``, in seconds."""
    text = raw.strip().lower()
    number, unit = (text[:-1], text[-1]) if text[-1:] in UNITS else (text, "s")
    try:
        value = float(number) * UNITS[unit]
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise ConfigError(
            f"{name} must be a duration such as 86400, 90m, 24h or 7d"
            f"{', or forever' if or_forever else ''}; got {raw!r}"
        )
    return value


IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,50}$")


def schema_name(name: str, raw: str) -> str:
    if not IDENTIFIER.match(raw):
        raise ConfigError(
            f"{name} must be a lowercase SQL identifier (letters, digits, _), got {raw!r}"
        )
    return raw


QUEUE_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")


def queue_list(name: str, raw: str) -> tuple[str, ...]:
    """Queue names, each with an optional limit of jobs at once: ``mail=10,reports=2,default``."""
    queues = tuple(q.strip() for q in raw.split(",") if q.strip())
    try:
        queue_limits(queues)
    except ValueError:
        queues = ()
    if not queues:
        raise ConfigError(
            f"{name} must be a comma-separated list of queue names (letters, digits, _ . : -), "
            f"each with an optional =N limit, e.g. mail=10,default; got {raw!r}"
        )
    return queues


def queue_limits(entries: Sequence[str]) -> dict[str, int | None]:
    """``("mail=10", "default")`` -> ``{"mail": 10, "default": None}`` (None: no own limit)."""
    limits: dict[str, int | None] = {}
    for entry in entries:
        queue, sep, limit = entry.partition("=")
        if not QUEUE_NAME.match(queue) or (sep and not (limit.isdigit() and int(limit) > 0)):
            raise ValueError(entry)
        limits[queue] = int(limit) if sep else None
    return limits


def boolean(name: str, raw: str) -> bool:
    """``true``/``false`` (also ``1``/``0``, ``yes``/``no``, ``on``/``off``); a flag of
    such a setting takes no value."""
    value = raw.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off", ""):
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def text(name: str, raw: str) -> str:
    if not raw.strip():
        raise ConfigError(f"{name} must not be empty")
    return raw.strip()


def optional_text(name: str, raw: str) -> str | None:
    return raw.strip() or None


def dsn(name: str, raw: str) -> str | None:
    """A DSN, or None (unset); one that lists several hosts must say which to use."""
    from jobqueue.db.hosts import failover_problem

    value = optional_text(name, raw)
    problem = None if value is None else failover_problem(value)
    if problem is not None:
        raise ConfigError(f"{name}: {problem} (docs/failover.md)")
    return value


# JOBQUEUE_DIRECT_DATABASE_URL's value for "there is no direct session" (poll-only).
NO_DIRECT_SESSION = "none"


def direct_url(name: str, raw: str) -> str | None:
    """A DSN (as ``dsn`` takes it), NO_DIRECT_SESSION, or None (unset)."""
    raw = raw.strip()
    return NO_DIRECT_SESSION if raw.lower() == NO_DIRECT_SESSION else dsn(name, raw)


def trace_url(name: str, raw: str) -> str | None:
    """A link template holding ``{trace_id}``, on http or https, or None (unset)."""
    raw = raw.strip()
    if not raw:
        return None
    if not raw.startswith(("https://", "http://")) or "{trace_id}" not in raw:
        raise ConfigError(
            f"{name} must be an http(s) URL holding {{trace_id}}, e.g. "
            f"https://tracing.example/trace/{{trace_id}}; got {raw!r}"
        )
    return raw


def address_list(name: str, raw: str) -> tuple[str, ...] | None:
    """IP addresses and networks (``10.0.0.5,192.168.0.0/16``), or None (empty)."""
    entries = tuple(e.strip() for e in raw.split(",") if e.strip())
    for entry in entries:
        try:
            # As uvicorn reads them: an entry it could not parse would trust no one.
            ipaddress.ip_network(entry) if "/" in entry else ipaddress.ip_address(entry)
        except ValueError:
            raise ConfigError(
                f"{name} must be a comma-separated list of IP addresses and networks "
                f"(e.g. 10.0.0.5,192.168.0.0/16); {entry!r} is neither"
            ) from None
    return entries or None


def one_of(*choices: str) -> Callable[[str, str], str]:
    def parse(name: str, raw: str) -> str:
        if raw.lower() not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
        return raw.lower()

    return parse


def tracing_mode(name: str, raw: str) -> str:
    import importlib.util

    mode = one_of("auto", "on", "off")(name, raw)
    if mode == "on":
        try:
            found = importlib.util.find_spec("opentelemetry.trace") is not None
        except ImportError:  # no opentelemetry package at all
            found = False
        if not found:
            raise ConfigError(f"{name}=on needs OpenTelemetry: pip install 'jobqueue[otel]'")
    return mode


def limit_entries(name: str, raw: str) -> str | None:
    from jobqueue.model.limits import parse_entries

    if not raw.strip():
        return None
    try:
        parse_entries(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from exc
    return raw.strip()


def cron_entries(name: str, raw: str) -> str | None:
    from jobqueue.cron import parse_entries

    if not raw.strip():
        return None
    try:
        parse_entries(tuple(raw.split(";")))
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from exc
    return raw.strip()
