"""``jobs update``, ``jobs run-now`` and ``jobs delete``: a job that has not started
changed or made due now, one that is not running deleted (docs/job-edits.md). Each is
a row of the audit log, by ``cli:<user>``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from jobqueue.audit import Actor
from jobqueue.cli.common import (
    Commands,
    UsageError,
    add_output_flags,
    aware_time,
    client,
    key_values,
    with_jobqueue,
)
from jobqueue.cli.output import print_json, print_record
from jobqueue.job_edits import WorkflowJobError
from jobqueue.task import PayloadError


def add_job_edit_commands(jobs: Commands) -> None:
    cmd = jobs.add_parser(
        "update",
        help="change a job that has not started",
        description="Change a pending job (due, scheduled or retrying); what is not given "
        "is kept. A running or ended job is refused.",
    )
    cmd.add_argument("id", type=int)
    when = cmd.add_mutually_exclusive_group()
    when.add_argument("--run-at", metavar="TIME", help="ISO 8601, with a time zone")
    when.add_argument("--delay", type=float, metavar="SECONDS", help="due this long from now")
    cmd.add_argument("--priority", type=int)
    cmd.add_argument("--queue")
    cmd.add_argument("--max-attempts", type=int)
    cmd.add_argument("--payload", metavar="JSON", help="a JSON object, checked as at enqueue")
    tags = cmd.add_mutually_exclusive_group()
    tags.add_argument("--tag", action="append", metavar="TAG", help="its tags, all of them")
    tags.add_argument("--clear-tags", action="store_true", help="remove its tags")
    meta = cmd.add_mutually_exclusive_group()
    meta.add_argument(
        "--meta", action="append", metavar="KEY=VALUE", help="its metadata, the whole of it"
    )
    meta.add_argument("--clear-meta", action="store_true", help="remove its metadata")
    add_output_flags(cmd)
    cmd.set_defaults(run=run_update)

    cmd = jobs.add_parser("run-now", help="make a scheduled or retrying job due now")
    cmd.add_argument("id", type=int)
    add_output_flags(cmd)
    cmd.set_defaults(run=run_run_now)

    cmd = jobs.add_parser("delete", help="delete a job that is not running, with its history")
    cmd.add_argument("id", type=int)
    add_output_flags(cmd)
    cmd.set_defaults(run=run_delete)


def run_update(args: argparse.Namespace) -> int:
    changes: dict[str, Any] = {
        key: value
        for key, value in (
            ("run_at", aware_time("--run-at", args.run_at)),
            ("delay_seconds", args.delay),
            ("priority", args.priority),
            ("queue", args.queue),
            ("max_attempts", args.max_attempts),
        )
        if value is not None
    }
    if args.payload is not None:
        try:
            changes["payload"] = json.loads(args.payload)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--payload: not JSON: {exc}") from None
    if args.tag or args.clear_tags:
        changes["tags"] = args.tag or []
    if args.meta or args.clear_meta:
        changes["meta"] = key_values("--meta", args.meta) or {}
    if not changes:
        raise UsageError("name at least one thing to change (--priority, --delay, ...)")
    jq = client(args)
    try:
        job = with_jobqueue(jq, lambda: jq.update_job(args.id, by=Actor.cli(), **changes))
    except PayloadError as exc:
        raise UsageError(f"--payload: {exc}") from None
    except ValueError as exc:
        field, _, message = str(exc).partition(": ")
        raise UsageError(f"--{field.replace('_', '-')}: {message}" if message else field) from None
    if args.json:
        print_record(job)
    else:
        print(f"job {job.id} ({job.type}) updated: {', '.join(sorted(changes))}")
    return 0


def run_run_now(args: argparse.Namespace) -> int:
    jq = client(args)
    job = with_jobqueue(jq, lambda: jq.run_now(args.id, by=Actor.cli()))
    if args.json:
        print_record(job)
    else:
        print(f"job {job.id} ({job.type}) is due now")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    jq = client(args)
    try:
        with_jobqueue(jq, lambda: jq.delete_job(args.id, by=Actor.cli()))
    except WorkflowJobError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print_json({"deleted": args.id})
    else:
        print(f"job {args.id} deleted")
    return 0
