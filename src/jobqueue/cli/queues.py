"""``queues``, ``queues pause`` and ``queues resume``: each queue's jobs and whether it runs."""

from __future__ import annotations

import argparse

from jobqueue.audit import Actor
from jobqueue.cli.common import Commands, UsageError, add_output_flags, client, with_jobqueue
from jobqueue.cli.output import print_records, print_table


def add_queue_commands(commands: Commands) -> None:
    queues = commands.add_parser("queues", help="list queues; pause or resume one")
    add_output_flags(queues)
    queues.set_defaults(run=run_queues)
    queue_commands = queues.add_subparsers(dest="queues_command", metavar="COMMAND")
    for action, text in (("pause", "stop workers starting this queue's jobs"),
                         ("resume", "let workers start this queue's jobs again")):  # fmt: skip
        cmd = queue_commands.add_parser(action, help=text, description=text)
        cmd.add_argument("name")
        add_output_flags(cmd)
        cmd.set_defaults(run=run_queues)


def run_queues(args: argparse.Namespace) -> int:
    """Every queue, or, after pausing or resuming one, that one."""
    action = getattr(args, "queues_command", None)
    jq = client(args)
    try:
        if action == "pause":
            queues = [with_jobqueue(jq, lambda: jq.pause(args.name, by=Actor.cli()))]
        elif action == "resume":
            queues = [with_jobqueue(jq, lambda: jq.resume(args.name, by=Actor.cli()))]
        else:
            queues = with_jobqueue(jq, jq.queues)
    except ValueError as exc:  # a queue name that breaks the rule
        raise UsageError(str(exc)) from exc
    if args.json:
        print_records(queues)
        return 0
    header = ("QUEUE", "PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "OLDEST", "STATE")
    rows = [
        (q.name, str(q.pending), str(q.running), str(q.completed), str(q.failed),
         str(q.cancelled),
         "" if q.oldest_pending_seconds is None else f"{q.oldest_pending_seconds:.1f}s",
         "paused" if q.paused else "active")
        for q in queues
    ]  # fmt: skip
    print_table(header, rows, "no queues")
    return 0
