"""``audit``: the audit log of control actions, newest first (see docs/audit.md)."""

from __future__ import annotations

import argparse
import json

from jobqueue.audit import Action, AuditEntry
from jobqueue.cli.common import Commands, UsageError, add_output_flags, client, with_jobqueue
from jobqueue.cli.output import format_time, print_records, print_table

MAX_LIMIT = 500


def add_audit_command(commands: Commands) -> None:
    text = "list control actions (retry, cancel, pause, resume, tokens), newest first"
    cmd = commands.add_parser("audit", help=text, description=text)
    cmd.add_argument("--limit", type=int, default=50, help=f"how many (1 to {MAX_LIMIT})")
    cmd.add_argument("--actor", help="only this actor: a token's name, cli:<user>, anonymous")
    cmd.add_argument("--action", help=f"only this action: {', '.join(Action)}")
    cmd.add_argument("--after", type=int, help="list rows older than this id")
    add_output_flags(cmd)
    cmd.set_defaults(run=run_audit)


def run_audit(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= MAX_LIMIT:
        raise UsageError(f"--limit must be from 1 to {MAX_LIMIT}, got {args.limit}")
    if args.action is not None and args.action not in set(Action):
        raise UsageError(f"--action must be one of {', '.join(Action)}, got {args.action!r}")
    jq = client(args)

    async def read() -> list[AuditEntry]:
        return await jq.inspect.audit_entries(
            actor=args.actor, action=args.action, before_id=args.after, limit=args.limit
        )

    entries = with_jobqueue(jq, read)
    if args.json:
        print_records(entries)
        return 0
    header = ("ID", "AT", "ACTOR", "ACTION", "ON", "COUNT", "CLIENT", "RESULT")
    rows = [
        (str(e.id), format_time(e.at), e.actor, e.action, on(e),
         "" if e.count is None else str(e.count), e.client or "", e.result)
        for e in entries
    ]  # fmt: skip
    print_table(header, rows, "no audit rows")
    return 0


def on(entry: AuditEntry) -> str:
    """What the action took: its target, or a bulk action's filters."""
    if entry.target is not None:
        return entry.target
    return json.dumps(entry.filter or {}, separators=(",", ":"))
