"""``types``: declare job types ahead of any worker, list and remove them
(docs/http-workers.md#declared-types).

A declared type is accepted by POST /jobs whether or not a worker that runs it is up;
with ``--payload-schema``, each payload of it is checked against that JSON Schema.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import asyncpg

from jobqueue.app import JobQueue
from jobqueue.audit import Actor
from jobqueue.cli.common import Commands, UsageError, add_output_flags, client, with_jobqueue
from jobqueue.cli.output import format_time, print_json, print_table
from jobqueue.job_types import SchemaError
from jobqueue.model.fields import check_type
from jobqueue.model.job_types import DeclaredType


def add_type_commands(commands: Commands) -> None:
    text = "declare job types ahead of any worker, with a payload schema if wanted"
    types = commands.add_parser("types", help=text, description=text)
    actions = types.add_subparsers(dest="action", required=True, metavar="COMMAND")

    add = actions.add_parser(
        "add",
        help="declare a type (again, to replace its schema)",
        description="Declare a job type: POST /jobs accepts it with no worker up. "
        "Declaring it again replaces its schema.",
    )
    add_output_flags(add)
    add.add_argument("name", help="the job type, as POST /jobs names it")
    add.add_argument(
        "--payload-schema",
        metavar="FILE",
        help="a JSON Schema each payload must match, from FILE (- for standard input); "
        "without it, any JSON object",
    )
    add.set_defaults(run=run_add)

    listing = actions.add_parser("list", help="every declared type")
    add_output_flags(listing)
    listing.set_defaults(run=run_list)

    remove = actions.add_parser("remove", help="forget a declared type; its jobs stay")
    add_output_flags(remove)
    remove.add_argument("name")
    remove.set_defaults(run=run_remove)


def run_add(args: argparse.Namespace) -> int:
    try:
        name = check_type(args.name)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    schema = None if args.payload_schema is None else read_schema(args.payload_schema)
    jq = client(args)

    async def declare() -> tuple[DeclaredType, bool]:
        try:
            return await jq.types.declare(name, payload_schema=schema, by=Actor.cli())
        except asyncpg.UndefinedTableError:
            # A schema from before declared types, or none yet: declaring may come
            # before the first `jobqueue serve`.
            await jq.migrate()
            return await jq.types.declare(name, payload_schema=schema, by=Actor.cli())

    try:
        declared, created = with_jobqueue(jq, declare)
    except SchemaError as exc:
        raise UsageError(f"--payload-schema: {exc}") from None
    if args.json:
        print_json(jsonable(declared))
    else:
        print(f"Type {name!r} {'declared' if created else 'updated'}: {described(declared)}.")
    return 0


def read_schema(path: str) -> dict[str, Any]:
    source = "standard input" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()  # noqa: SIM115
    except OSError as exc:
        raise UsageError(f"--payload-schema: cannot read {path}: {exc.strerror}") from None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--payload-schema: {source} is not JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise UsageError(f"--payload-schema: {source} must hold a JSON object (a JSON Schema)")
    return schema


def run_list(args: argparse.Namespace) -> int:
    jq = client(args)

    async def listed() -> list[DeclaredType]:
        try:
            return await jq.types.list()
        except asyncpg.UndefinedTableError:
            return []

    declared = with_jobqueue(jq, listed)
    if args.json:
        print_json([jsonable(d) for d in declared])
        return 0
    rows = [(d.name, described(d), format_time(d.updated_at)) for d in declared]
    print_table(("TYPE", "PAYLOAD", "CHANGED"), rows, "no declared types")
    return 0


def run_remove(args: argparse.Namespace) -> int:
    jq = client(args)
    removed = with_jobqueue(jq, lambda: _remove(jq, args.name))
    if removed is None:
        raise UsageError(f"no type is declared as {args.name!r}")
    if args.json:
        print_json(jsonable(removed))
    else:
        print(f"Type {removed.name!r} removed; its jobs stay.")
    return 0


async def _remove(jq: JobQueue, name: str) -> DeclaredType | None:
    try:
        return await jq.types.remove(name, by=Actor.cli())
    except asyncpg.UndefinedTableError:
        return None


def described(declared: DeclaredType) -> str:
    return "any JSON object" if declared.payload_schema is None else "checked by its schema"


def jsonable(declared: DeclaredType) -> dict[str, object]:
    return {
        "name": declared.name,
        "payload_schema": declared.payload_schema,
        "created_at": declared.created_at.isoformat(),
        "updated_at": declared.updated_at.isoformat(),
    }
