"""``queues``, ``queues pause``, ``queues resume`` and ``queues limit``: each queue's jobs,
whether it runs, and its limits shared by every worker (docs/limits.md)."""

from __future__ import annotations

import argparse

from jobqueue.audit import Actor
from jobqueue.cli.common import Commands, UsageError, add_output_flags, client, with_jobqueue
from jobqueue.cli.output import print_records, print_table
from jobqueue.model.job import QueueInfo


def add_queue_commands(commands: Commands) -> None:
    text = "list queues; pause or resume one, or set its limits"
    queues = commands.add_parser("queues", help=text, description=text)
    add_output_flags(queues)
    queues.set_defaults(run=run_queues)
    queue_commands = queues.add_subparsers(dest="queues_command", metavar="COMMAND")
    for action, text in (("pause", "stop workers starting this queue's jobs"),
                         ("resume", "let workers start this queue's jobs again")):  # fmt: skip
        cmd = queue_commands.add_parser(action, help=text, description=text)
        cmd.add_argument("name")
        add_output_flags(cmd)
        cmd.set_defaults(run=run_queues)
    text = "set limits shared by every worker (none removes one; the others are kept)"
    limit = queue_commands.add_parser("limit", help=text, description=text)
    limit.add_argument("name")
    for flag, what in LIMIT_FLAGS.items():
        limit.add_argument(f"--{flag.replace('_', '-')}", dest=flag, metavar="VALUE", help=what)
    add_output_flags(limit)
    limit.set_defaults(run=run_queues)


LIMIT_FLAGS = {
    "global_limit": "at most N of the queue's jobs running at once",
    "key_limit": "at most N jobs of one concurrency key running at once",
    "rate_limit": "at most N starts in any window of the period: N/s, N/m or N/h",
    "key_rate_limit": "the same, for each concurrency key",
}


def limits_given(args: argparse.Namespace) -> dict[str, int | str | None]:
    """The limits the flags set: counts as integers, "none" as None."""
    given: dict[str, int | str | None] = {}
    for flag in LIMIT_FLAGS:
        value = getattr(args, flag)
        if value is None:
            continue
        if value.lower() == "none":
            given[flag] = None
        elif flag.endswith("rate_limit"):
            given[flag] = value
        elif value.isdigit():
            given[flag] = int(value)
        else:
            raise UsageError(f"--{flag.replace('_', '-')}: must be a whole number or none")
    if not given:
        raise UsageError(f"queues limit: give at least one of {', '.join(LIMIT_FLAGS)}")
    return given


def limits_text(q: QueueInfo) -> str:
    """Each limit with its use: ``global 3/5 rate 12/100/m``."""
    if q.limits is None:
        return ""
    lim = q.limits
    parts = []
    if lim.global_limit is not None:
        parts.append(f"global {lim.global_in_use}/{lim.global_limit}")
    if lim.key_limit is not None:
        parts.append(f"key {lim.key_limit} ({lim.keys_at_limit} full)")
    if lim.rate_limit is not None:
        parts.append(f"rate {lim.rate_in_use}/{lim.rate_limit}")
    if lim.key_rate_limit is not None:
        parts.append(f"key rate {lim.key_rate_limit}")
    return " ".join(parts)


def run_queues(args: argparse.Namespace) -> int:
    """Every queue, or, after pausing or resuming one, that one."""
    action = getattr(args, "queues_command", None)
    jq = client(args)
    try:
        if action == "pause":
            queues = [with_jobqueue(jq, lambda: jq.pause(args.name, by=Actor.cli()))]
        elif action == "resume":
            queues = [with_jobqueue(jq, lambda: jq.resume(args.name, by=Actor.cli()))]
        elif action == "limit":
            given = limits_given(args)
            queues = [with_jobqueue(jq, lambda: jq.set_limits(args.name, by=Actor.cli(), **given))]
        else:
            queues = with_jobqueue(jq, jq.queues)
    except ValueError as exc:  # a queue name or a limit that breaks the rule
        raise UsageError(str(exc)) from exc
    if args.json:
        print_records(queues)
        return 0
    header = ("QUEUE", "PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "OLDEST", "STATE",
              "LIMITS")  # fmt: skip
    rows = [
        (q.name, str(q.pending), str(q.running), str(q.completed), str(q.failed),
         str(q.cancelled),
         "" if q.oldest_pending_seconds is None else f"{q.oldest_pending_seconds:.1f}s",
         "paused" if q.paused else "active", limits_text(q))
        for q in queues
    ]  # fmt: skip
    print_table(header, rows, "no queues")
    return 0
