"""``serve``, ``worker`` and ``api``: the long-running process, with all its roles or one."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import threading
import time

from jobqueue import logs, settings_parsing, supervisor
from jobqueue.cli.common import Commands, add_setting_flags, settings_from
from jobqueue.server import Roles, event_loop, load_jobqueue, serve

# The settings each command's --help shows: what people type. Every other setting is a
# flag too, listed by `jobqueue settings` (the help would otherwise run to 300 lines).
SERVE_FLAGS = ("host", "port", "database_url", "data_dir", "app", "worker_count", "log_level")
WORKER_FLAGS = ("database_url", "data_dir", "app", "worker_count", "metrics_port", "log_level")
API_FLAGS = ("host", "port", "database_url", "data_dir", "log_level")
EPILOG = (
    "Every setting is also a flag, these and the others: `jobqueue settings` lists them "
    "all with their variables, defaults and values (docs/configuration.md)."
)


def add_service_commands(commands: Commands) -> None:
    for name, roles, text, shown in (
        ("serve", Roles(api=True, worker=True), "HTTP API and workers in one process",
         SERVE_FLAGS),
        ("worker", Roles(api=False, worker=True), "workers only", WORKER_FLAGS),
        ("api", Roles(api=True, worker=False), "HTTP API only", API_FLAGS),
    ):  # fmt: skip
        cmd = commands.add_parser(name, help=text, description=text, epilog=EPILOG)
        add_setting_flags(cmd, None, shown=shown)
        cmd.add_argument(
            "--no-migrate",
            dest="migrate",
            action="store_const",
            const="false",
            help="do not apply the schema at start-up",
        )
        if roles.api:
            cmd.add_argument(
                "--insecure-no-auth",
                action="store_true",
                help="serve HTTP beyond loopback while no API token exists (a warning "
                "is logged); without it, such a start is refused",
            )
        if roles.worker:
            cmd.add_argument(
                "--queue",
                action="append",
                dest="queue_entries",
                metavar="NAME[=N]",
                help="serve this queue, at most N of its jobs at once if given; repeatable "
                "(the same as JOBQUEUE_QUEUES, which it replaces)",
            )
        if name == "worker":
            cmd.add_argument(
                "--processes",
                default="1",
                metavar="N",
                help="run N worker processes, e.g. one per core (default 1)",
            )
        cmd.set_defaults(run=run_service, roles=roles)


WORKER_POOL_SIZE = 1


def run_service(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    logs.configure(settings.log_level, settings.log_format)
    processes = settings_parsing.positive_int("--processes", getattr(args, "processes", "1"))
    if not args.roles.api and settings.pool_size is None:
        # A worker alone: one connection, so a host's grow with its processes, not with
        # their claims, completions and heartbeats (JOBQUEUE_POOL_SIZE says the cost).
        settings = dataclasses.replace(settings, pool_size=WORKER_POOL_SIZE)
    if processes > 1:
        return supervisor.run(settings, processes)
    jq = load_jobqueue(settings.app)
    if settings.database_url is None and jq.settings.database_url:
        # A DSN written into the application's JobQueue(...) holds unless overridden.
        settings = dataclasses.replace(settings, database_url=jq.settings.database_url)
    jq.settings = settings
    try:
        with asyncio.Runner(loop_factory=event_loop(args.roles)) as runner:
            code = runner.run(serve(jq, args.roles))
    finally:
        jq.close_sync()
    exit_despite_stuck_threads(code)
    return code


def exit_despite_stuck_threads(code: int) -> None:
    """A sync handler still running in a thread cannot be stopped, and Python would wait
    for it at exit; its job is already handed back, so leave without it."""
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        if not any(t.name.startswith("jobqueue-handler") for t in threading.enumerate()):
            return
        time.sleep(0.05)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
