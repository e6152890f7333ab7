"""``workers``: the worker processes with a recent heartbeat."""

from __future__ import annotations

import argparse

from jobqueue.cli.common import Commands, add_output_flags, client, with_jobqueue
from jobqueue.cli.output import format_time, print_records, print_table


def add_worker_commands(commands: Commands) -> None:
    cmd = commands.add_parser("workers", help="list the worker processes")
    add_output_flags(cmd)
    cmd.set_defaults(run=run_workers)


def run_workers(args: argparse.Namespace) -> int:
    jq = client(args)
    workers = with_jobqueue(jq, jq.workers)
    if args.json:
        print_records(workers)
        return 0
    # TYPES: the job types it claims; "any" for a worker that claims every type.
    header = ("ID", "HOST", "PID", "QUEUES", "RUNNING", "LAST HEARTBEAT", "TYPES")
    rows = [
        (w.id, w.host, str(w.pid), ",".join(w.queues), f"{w.running}/{w.slots}",
         format_time(w.heartbeat_at), "any" if w.any_type else ",".join(w.types or ()))
        for w in workers
    ]  # fmt: skip
    print_table(header, rows, "no workers")
    return 0
