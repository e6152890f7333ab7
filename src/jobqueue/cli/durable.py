"""What ``jobqueue jobs`` says of durable jobs (docs/durable.md): ``jobs signal`` sends
a job a signal (a row of the audit log, by ``cli:<user>``), and ``jobs get`` shows a
job's steps, what it waits for, its parent and its children."""

from __future__ import annotations

import argparse
import json
import sys

from jobqueue.audit import Actor
from jobqueue.cli.common import Commands, UsageError, add_output_flags, client, with_jobqueue
from jobqueue.cli.output import format_time, print_json, print_table
from jobqueue.durable import SignalRefused
from jobqueue.model.job import JobNotFound
from jobqueue.model.steps import JobDetail


def add_signal_command(jobs: Commands) -> None:
    cmd = jobs.add_parser(
        "signal",
        help="send a durable job a signal",
        description="Send the job a signal, for its handler's ctx.wait_for_signal(NAME): "
        "a job waiting for it is woken, and one that waits later gets it then. A job "
        "that has ended is refused.",
    )
    cmd.add_argument("id", type=int)
    cmd.add_argument("name")
    cmd.add_argument("--payload", metavar="JSON", help="what the handler gets (default null)")
    add_output_flags(cmd)
    cmd.set_defaults(run=run_signal)


def run_signal(args: argparse.Namespace) -> int:
    payload = None
    if args.payload is not None:
        try:
            payload = json.loads(args.payload)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--payload: not JSON: {exc}") from None
    jq = client(args)
    try:
        signal_id = with_jobqueue(
            jq, lambda: jq.signal(args.id, args.name, payload, by=Actor.cli())
        )
    except SignalRefused as exc:
        if not exc.ended:
            raise JobNotFound(args.id) from None
        print(f"jobqueue: error: {exc}", file=sys.stderr)  # a conflict, as a 409
        return 1
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print_json({"id": signal_id, "job_id": args.id, "name": args.name})
    else:
        print(f"signal {args.name!r} sent to job {args.id}")
    return 0


def print_durable(job: JobDetail) -> None:
    """After a job's fields: its parent, its wait, its children and its steps."""
    if job.spawned_by is not None:
        print(f"{'spawned_by':>19}: job {job.spawned_by}")
    wait = job.waiting_for
    if wait is not None:
        if wait.children is not None:
            shown = f"its children: {wait.ended} of {wait.children} ended"
        elif wait.signal is not None:
            limit = "" if wait.until is None else f" until {format_time(wait.until)}"
            shown = f"the signal {wait.signal!r}{limit}"
        else:
            shown = "" if wait.until is None else f"{format_time(wait.until)}"
        print(f"{'waiting_for':>19}: {shown}")
    if job.children is not None:
        print()
        rows = [(str(c.id), c.type, c.status) for c in job.children.first]
        print_table(("CHILD", "TYPE", "STATE"), rows, "")
        if job.children.total > len(job.children.first):
            print(f"... {job.children.total} children, {job.children.ended} ended")
    if job.steps:  # what a durable handler recorded
        print()
        steps = [
            (s.name, str(s.attempt), format_time(s.recorded_at), json.dumps(s.result))
            for s in job.steps
        ]
        print_table(("STEP", "ATTEMPT", "RECORDED", "RESULT"), steps, "")
