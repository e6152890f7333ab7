"""``bench``, ``migrate`` and ``grants``: an operator's commands about the installation,
not its jobs."""

from __future__ import annotations

import argparse
import runpy
import sys
from collections.abc import Callable
from pathlib import Path

from jobqueue.app import JobQueue
from jobqueue.cli.common import (
    DATABASE_SETTINGS,
    Commands,
    UsageError,
    add_setting_flags,
    client,
    with_jobqueue,
)
from jobqueue.db import grants
from jobqueue.db.migrate import SchemaStatus, code_version
from jobqueue.db.sql import migrations
from jobqueue.server import StartupError


def add_admin_commands(commands: Commands) -> None:
    # Only for the help: main hands `bench` its arguments before this parser sees them,
    # since the benchmark parses its own.
    commands.add_parser(
        "bench", add_help=False, help="measure throughput and latency, with peers (--help)"
    )

    cmd = commands.add_parser(
        "migrate",
        help="apply the schema and exit",
        description="Apply the migrations the database has not had, in one transaction. "
        "--status lists the applied and pending ones; --dry-run applies the pending ones "
        "in a transaction it rolls back, and prints the locks each took.",
    )
    shown = cmd.add_mutually_exclusive_group()
    shown.add_argument(
        "--status", action="store_true", help="list applied and pending; change nothing"
    )
    shown.add_argument(
        "--dry-run", action="store_true", help="print what would run and its locks; change nothing"
    )
    add_setting_flags(cmd, DATABASE_SETTINGS)
    cmd.set_defaults(run=run_migrate)

    cmd = commands.add_parser(
        "grants",
        help="print the GRANT statements of a least-privilege role, for psql",
        description="Print what a database role needs to enqueue, to run workers or to "
        "serve the API on the configured schema, as SQL to run as the schema's owner: "
        "jobqueue grants --role app --for enqueue | psql",
    )
    cmd.add_argument("--role", required=True, metavar="NAME", help="the role to grant to")
    cmd.add_argument(
        "--for", dest="purpose", required=True, choices=grants.PURPOSES, help="what it runs"
    )
    add_setting_flags(cmd, DATABASE_SETTINGS)
    cmd.set_defaults(run=run_grants)


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
    if args.status:
        print_status(with_jobqueue(jq, jq.schema_status))
        return 0
    if args.dry_run:
        planned = with_jobqueue(jq, jq.migrate_dry_run)
        for migration, steps in planned:
            print(f"{migration.version:4d}  {migration.name}")
            for statement, locks in steps:
                if statement:
                    print(f"      {statement}")
                for lock in locks:
                    print(f"          {lock}" if statement else f"      {lock}")
        print(f"{len(planned)} pending; nothing was changed" if planned else "schema up to date")
        return 0
    applied = with_jobqueue(jq, jq.migrate)
    print(f"applied migrations: {', '.join(map(str, applied))}" if applied else "schema up to date")
    return 0


def print_status(found: SchemaStatus) -> None:
    for version, name, applied_at in found.applied:
        print(f"applied  {version:4d}  {name:32s} {applied_at:%Y-%m-%d %H:%M:%S %Z}")
    for migration in found.pending:
        print(f"pending  {migration.version:4d}  {migration.name}")
    print(f"schema at {found.version}, this jobqueue needs {code_version()}")


def run_grants(args: argparse.Namespace) -> int:
    try:
        grants.check_role(args.role)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    jq = client(args)
    tables = with_jobqueue(jq, lambda: migrated_tables(jq))
    print("\n".join(grants.statements(jq.settings.schema, args.role, args.purpose, tables)))
    return 0


async def migrated_tables(jq: JobQueue) -> set[str]:
    """The schema's tables, once it has every migration: the grants name its functions."""
    tables = await jq.inspect.schema_tables()
    latest = migrations(jq.settings.schema)[-1].version
    if "jobqueue_migrations" not in tables or latest not in await jq.inspect.migrations_applied():
        raise StartupError(
            f"schema {jq.settings.schema!r} is not migrated to this version; "
            "run jobqueue migrate (as its owner) first"
        )
    return tables
