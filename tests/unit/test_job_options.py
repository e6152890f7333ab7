"""Every way to enqueue takes the same options (jobqueue.model.options): one that a path
lacks fails here, naming the path. Task.enqueue once had no concurrency_key while
JobQueue.enqueue had one; the CLI had none either."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from jobqueue.app import JobQueue
from jobqueue.cli import build_parser
from jobqueue.enqueue.new_job import NewJob
from jobqueue.model import fields
from jobqueue.model.options import BATCH_OPTIONS, JOB_OPTIONS
from jobqueue.task import Task
from jobqueue.workflows.builder import _OPTIONS, WorkflowBuilder

# What a path takes besides a job's options.
BESIDES = {"conn", "payload", "ref", "depends_on", "on_failure", "run_if", "force", "json",
           "type", "database_url", "schema", "run", "command"}  # fmt: skip
# The CLI's flags are named for the command line.
CLI_NAMES = {"delay": "delay_seconds"}


def keywords(function: Callable[..., Any]) -> set[str]:
    parameters = inspect.signature(function).parameters.values()
    return {p.name for p in parameters if p.kind is p.KEYWORD_ONLY} - BESIDES


def cli_enqueue_options() -> set[str]:
    commands = next(
        a for a in build_parser()._actions if a.dest == "command" or a.choices
    )  # the subcommands
    assert isinstance(commands.choices, dict)
    enqueue = commands.choices["enqueue"]
    names = {CLI_NAMES.get(a.dest, a.dest) for a in enqueue._actions
             if a.dest != "help" and not a.dest.startswith("setting_")}  # fmt: skip
    return names - BESIDES


def test_every_path_takes_every_job_option() -> None:
    paths: dict[str, set[str]] = {
        "JobQueue.enqueue": keywords(JobQueue.enqueue),
        "JobQueue.enqueue_sync": keywords(JobQueue.enqueue_sync),
        "Task.enqueue": keywords(Task.enqueue),
        "Task.enqueue_async": keywords(Task.enqueue_async),
        "WorkflowBuilder.add": keywords(WorkflowBuilder.add),
        "workflow step(**options)": set(_OPTIONS),
        "POST /jobs (NewJob)": set(NewJob.model_fields) - BESIDES,
        "fields.check_options": keywords(fields.check_options),
        "jobqueue enqueue": cli_enqueue_options(),
    }
    wrong = {path: sorted(set(JOB_OPTIONS) ^ got) for path, got in paths.items()
             if got != set(JOB_OPTIONS)}  # fmt: skip
    assert wrong == {}


def test_a_batch_takes_every_option_but_a_unique_key() -> None:
    assert keywords(JobQueue.enqueue_many) == set(BATCH_OPTIONS)
