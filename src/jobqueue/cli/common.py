"""What every command group shares: the setting flags, and a JobQueue to run one call on."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeAlias, TypeVar

from jobqueue import config, logs, settings_parsing
from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.model import search

T = TypeVar("T")

# What build_parser hands each group to add its commands to.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
# Each command's parser stores its run function as `run`; main calls it for the exit code.
Run: TypeAlias = Callable[[argparse.Namespace], int]

# Flags every command takes: they say where the database is.
DATABASE_SETTINGS = ("database_url", "schema", "data_dir", "log_level", "log_format")


class UsageError(Exception):
    """Bad input on the command line; the message is one line."""


def add_output_flags(cmd: argparse.ArgumentParser) -> None:
    add_setting_flags(cmd, DATABASE_SETTINGS)
    cmd.add_argument("--json", action="store_true", help="print JSON for scripts")


def add_setting_flags(
    cmd: argparse.ArgumentParser,
    only: Sequence[str] | None,
    *,
    shown: Sequence[str] | None = None,
) -> None:
    """A flag per setting (``only`` these, if given); ``shown``: only these in --help,
    the others being listed by `jobqueue settings`."""
    group = cmd.add_argument_group("settings (each also an environment variable)")
    for f in config.env_settings():
        if only is None or f.name in only:
            text = f"{f.metadata['doc']} Default: {f.default!r}.".replace("%", "%%")
            visible = shown is None or f.name in shown
            if f.metadata["parse"] is settings_parsing.boolean:  # a switch: given, it is on
                group.add_argument(
                    config.flag_name(f),
                    dest=f"setting_{f.name}",
                    action="store_const",
                    const="true",
                    help=f"{text} The same as {f.metadata['env']}=true."
                    if visible
                    else argparse.SUPPRESS,
                )
                continue
            group.add_argument(
                config.flag_name(f),
                dest=f"setting_{f.name}",
                metavar=f.metadata["env"],
                help=text if visible else argparse.SUPPRESS,
            )


def settings_from(args: argparse.Namespace) -> Settings:
    flags: dict[str, str] = {
        key.removeprefix("setting_"): value
        for key, value in vars(args).items()
        if key.startswith("setting_") and value is not None
    }
    if getattr(args, "migrate", None) == "false":
        flags["migrate"] = "false"
    if getattr(args, "insecure_no_auth", False):
        flags["insecure_no_auth"] = "true"
    if getattr(args, "queue_entries", None):
        flags["queues"] = ",".join(args.queue_entries)
    return config.load(flags=flags)


def client(args: argparse.Namespace) -> JobQueue:
    settings = settings_from(args)
    logs.configure("warning", settings.log_format)
    return JobQueue(settings=settings)


def with_jobqueue(jq: JobQueue, call: Callable[[], Awaitable[T]]) -> T:
    """What ``call`` returns, run with ``jq`` open and closed again after."""

    async def run() -> T:
        async with jq:
            return await call()

    return asyncio.run(run())


def aware_time(flag: str, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise UsageError(f"{flag} must be an ISO 8601 time, got {value!r}") from exc
    if parsed.tzinfo is None:
        raise UsageError(f"{flag} needs a time zone, e.g. {value}Z or {value}+01:00")
    return parsed


def key_values(flag: str, pairs: list[str] | None) -> dict[str, Any] | None:
    """``KEY=VALUE`` flags as one JSON object (search.containment); UsageError names
    the flag."""
    if not pairs:
        return None
    terms = []
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals:
            raise UsageError(f"{flag}: must be KEY=VALUE, got {pair!r}")
        terms.append((key, value))
    try:
        return search.containment(terms, flag)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
