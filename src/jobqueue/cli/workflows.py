"""``workflows list|get|cancel``: the newest workflows with their jobs counted by state;
one workflow and the state of each of its jobs."""

from __future__ import annotations

import argparse
import sys

from jobqueue import settings_parsing
from jobqueue.audit import Actor
from jobqueue.cli.common import Commands, add_output_flags, client, with_jobqueue
from jobqueue.cli.output import format_time, print_json, print_table
from jobqueue.workflows.model import Workflow, WorkflowSummary
from jobqueue.workflows.store import STATES


def add_workflow_commands(commands: Commands) -> None:
    text = "list, inspect and cancel workflows"
    workflows = commands.add_parser("workflows", help=text, description=text).add_subparsers(
        dest="workflows_command", required=True, metavar="COMMAND"
    )
    cmd = workflows.add_parser(
        "list",
        help="the newest workflows, with their jobs counted by state",
        description="The newest workflows, newest first, with their jobs counted by state.",
    )
    cmd.add_argument("--limit", default="20", metavar="N", help="at most N (default 20)")
    add_output_flags(cmd)
    cmd.set_defaults(run=run_list)
    cmd = workflows.add_parser("get", help="show a workflow and each job's state")
    cmd.add_argument("id", type=int)
    add_output_flags(cmd)
    cmd.set_defaults(run=run_get)
    cmd = workflows.add_parser("cancel", help="cancel every job of a workflow not ended yet")
    cmd.add_argument("id", type=int)
    add_output_flags(cmd)
    cmd.set_defaults(run=run_cancel)


def run_list(args: argparse.Namespace) -> int:
    limit = settings_parsing.positive_int("--limit", args.limit)
    jq = client(args)
    summaries: list[WorkflowSummary] = with_jobqueue(jq, lambda: jq.list_workflows(limit))
    if args.json:
        from jobqueue.encoding import to_jsonable

        print_json(to_jsonable(summaries))
        return 0
    rows = [
        [str(w.id), w.name or "", format_time(w.created_at), w.status]
        + [str(w.jobs[state]) for state in STATES]
        for w in summaries
    ]
    header = ["ID", "NAME", "CREATED", "STATE", *(state.upper() for state in STATES)]
    print_table(header, rows, "no workflows")
    return 0


def run_get(args: argparse.Namespace) -> int:
    jq = client(args)
    return show(with_jobqueue(jq, lambda: jq.get_workflow(args.id)), args)


def run_cancel(args: argparse.Namespace) -> int:
    jq = client(args)
    return show(with_jobqueue(jq, lambda: jq.cancel_workflow(args.id, by=Actor.cli())), args)


def show(workflow: Workflow | None, args: argparse.Namespace) -> int:
    if workflow is None:
        print(f"jobqueue: error: workflow {args.id} not found", file=sys.stderr)
        return 1
    if args.json:
        from jobqueue.encoding import to_jsonable

        print_json(to_jsonable(workflow))
        return 0
    name = f" ({workflow.name})" if workflow.name else ""
    print(f"workflow {workflow.id}{name}: {workflow.status}, {len(workflow.jobs)} jobs")
    rows = [
        [n.ref, str(n.job.id), n.job.type, str(n.job.status), ",".join(n.depends_on)]
        for n in workflow.jobs
    ]
    print_table(["REF", "ID", "TYPE", "STATE", "DEPENDS ON"], rows, "no jobs")
    return 0
