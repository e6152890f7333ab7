"""``tokens``: create, list and revoke the API's bearer tokens (docs/security.md).

The command talks to the database directly: whoever can run it with the database's
credentials administers the API. A secret is printed once, by ``create``, and never
again: only its hash is stored.
"""

from __future__ import annotations

import argparse
import dataclasses
from datetime import datetime

import asyncpg

from jobqueue import config, settings_parsing
from jobqueue.app import JobQueue
from jobqueue.audit import Actor
from jobqueue.auth.tokens import new_token
from jobqueue.cli.common import Commands, UsageError, add_output_flags, client, with_jobqueue
from jobqueue.cli.output import format_time, print_json, print_table
from jobqueue.model.tokens import Scope, TokenError, TokenInfo


def add_token_commands(commands: Commands) -> None:
    text = "create, list and revoke API tokens"
    tokens = commands.add_parser("tokens", help=text, description=text)
    actions = tokens.add_subparsers(dest="action", required=True, metavar="COMMAND")

    create = actions.add_parser("create", help="make a token and print its secret, once")
    add_output_flags(create)
    create.add_argument("--name", required=True, help="who or what uses it, e.g. billing-app")
    create.add_argument(
        "--scope",
        action="append",
        required=True,
        metavar="SCOPE",
        help=f"what it may do, repeatable: {', '.join(Scope)}",
    )
    create.add_argument(
        "--queue", action="append", metavar="Q", help="only these queues (repeatable)"
    )
    create.add_argument("--type", action="append", metavar="T", help="only these job types")
    create.add_argument(
        "--expires", metavar="DURATION", help="e.g. 30d, 12h or 3600 (default: never)"
    )
    create.set_defaults(run=run_create)

    listing = actions.add_parser("list", help="every token, without its secret")
    add_output_flags(listing)
    listing.set_defaults(run=run_list)

    revoke = actions.add_parser("revoke", help="revoke a token: refused within a second")
    add_output_flags(revoke)
    revoke.add_argument("name")
    revoke.set_defaults(run=run_revoke)


def run_create(args: argparse.Namespace) -> int:
    expires = None
    if args.expires is not None:
        try:
            expires = settings_parsing.retention("--expires", args.expires)
        except config.ConfigError as exc:
            raise UsageError(str(exc)) from exc
    try:
        stored, secret = new_token(
            name=args.name, scopes=args.scope, queues=args.queue, types=args.type
        )
    except TokenError as exc:
        raise UsageError(str(exc)) from exc
    jq = client(args)

    async def create() -> TokenInfo | None:
        try:
            return await jq.tokens.create(stored, expires_in_seconds=expires, by=Actor.cli())
        except asyncpg.UndefinedTableError:
            # No schema yet: the first thing a new installation does may be this, as
            # `serve --host 0.0.0.0` refuses to start (and migrate) without a token.
            await jq.migrate()
            return await jq.tokens.create(stored, expires_in_seconds=expires, by=Actor.cli())

    info = with_jobqueue(jq, create)
    if info is None:
        raise UsageError(f"a token named {args.name!r} exists; revoke it first")
    if args.json:
        print_json({"name": info.name, "secret": secret})
        return 0
    print(f"Token {info.name!r} created. Its secret, shown this once:\n\n    {secret}\n")
    print("Send it as: Authorization: Bearer <secret>")
    return 0


def run_list(args: argparse.Namespace) -> int:
    jq = client(args)

    now, infos = with_jobqueue(jq, jq.tokens.list)
    if args.json:
        print_json([_jsonable(t, now) for t in infos])
        return 0
    header = ("NAME", "SCOPES", "QUEUES", "TYPES", "CREATED", "EXPIRES", "STATE")
    rows = [
        (t.name, ",".join(t.scopes), _names(t.queues), _names(t.types),
         format_time(t.created_at), format_time(t.expires_at) if t.expires_at else "never",
         t.state(now))
        for t in infos
    ]  # fmt: skip
    print_table(header, rows, "no tokens")
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    jq = client(args)
    info = with_jobqueue(jq, lambda: _revoke(jq, args.name))
    if info is None:
        raise UsageError(f"no unrevoked token is named {args.name!r}")
    if args.json:
        print_json(_jsonable(info, info.revoked_at or info.created_at))
    else:
        print(f"Token {info.name!r} revoked.")
    return 0


async def _revoke(jq: JobQueue, name: str) -> TokenInfo | None:
    return await jq.tokens.revoke(name, by=Actor.cli())


def _names(names: tuple[str, ...] | None) -> str:
    return "*" if names is None else ",".join(names)


def _jsonable(info: TokenInfo, now: datetime) -> dict[str, object]:
    fields: dict[str, object] = {
        k: v.isoformat() if isinstance(v, datetime) else v
        for k, v in dataclasses.asdict(info).items()
    }
    fields["state"] = info.state(now)
    return fields
