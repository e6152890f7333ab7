"""``bench`` and ``migrate``: an operator's commands about the installation, not its jobs."""

from __future__ import annotations

import argparse
import runpy
import sys
from collections.abc import Callable
from pathlib import Path

from jobqueue.cli.common import (
    DATABASE_SETTINGS,
    Commands,
    add_setting_flags,
    client,
    with_jobqueue,
)


def add_admin_commands(commands: Commands) -> None:
    # Only for the help: main hands `bench` its arguments before this parser sees them,
    # since the benchmark parses its own.
    commands.add_parser(
        "bench", add_help=False, help="measure throughput and latency, with peers (--help)"
    )

    cmd = commands.add_parser("migrate", help="apply the schema and exit")
    add_setting_flags(cmd, DATABASE_SETTINGS)
    cmd.set_defaults(run=run_migrate)


def run_bench(argv: list[str]) -> int:
    """The benchmark lives in the source checkout's bench/, beside its peer runners."""
    script = Path(__file__).resolve().parents[3] / "bench" / "run.py"
    if not script.is_file():
        print("jobqueue: error: jobqueue bench runs from a source checkout", file=sys.stderr)
        return 2
    bench = runpy.run_path(str(script), run_name="jobqueue_bench")
    main: Callable[[list[str]], int] = bench["main"]
    return main(argv)


def run_migrate(args: argparse.Namespace) -> int:
    jq = client(args)
    applied = with_jobqueue(jq, jq.migrate)
    print(f"applied migrations: {', '.join(map(str, applied))}" if applied else "schema up to date")
    return 0
