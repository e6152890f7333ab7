"""Every way to enqueue takes the same options (jobqueue.model.options): one that a path
lacks fails here, naming the path. Task.enqueue once had no concurrency_key while
JobQueue.enqueue had one; the CLI had none either. The Python paths take them as
``**options: Unpack[EnqueueOptions]``, so they cannot drift; the HTTP schema and the
CLI name them one by one."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable
from typing import Any

import pytest

from jobqueue.app import JobQueue
from jobqueue.cli import build_parser
from jobqueue.config import load
from jobqueue.enqueue.new_job import NewJob
from jobqueue.enqueue.rows import Rows
from jobqueue.model import fields, options
from jobqueue.model.options import BATCH_OPTIONS, JOB_OPTIONS
from jobqueue.task import _options_and_fields
from jobqueue.workflows.builder import _OPTIONS, WorkflowBuilder, step

# What a path takes besides a job's options.
BESIDES = {"conn", "payload", "ref", "depends_on", "on_failure", "run_if", "force", "json",
           "type", "database_url", "schema", "run", "command"}  # fmt: skip
# The CLI's flags are named for the command line.
CLI_NAMES = {"delay": "delay_seconds", "tag": "tags"}


def keywords(function: Callable[..., Any]) -> set[str]:
    """The keywords ``function`` takes: its keyword-only parameters, and the keys of
    the TypedDict its ``**kwargs`` unpacks."""
    parameters = inspect.signature(function).parameters.values()
    named = {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}
    for p in parameters:
        unpacked = re.fullmatch(r"Unpack\[(\w+)\]", str(p.annotation))
        if p.kind is p.VAR_KEYWORD and unpacked:
            named |= set(getattr(options, unpacked.group(1)).__annotations__)
    return named - BESIDES


def cli_enqueue_options() -> set[str]:
    commands = next(
        a for a in build_parser()._actions if a.dest == "command" or a.choices
    )  # the subcommands
    assert isinstance(commands.choices, dict)
    enqueue = commands.choices["enqueue"]
    names = {CLI_NAMES.get(a.dest, a.dest) for a in enqueue._actions
             if a.dest != "help" and not a.dest.startswith("setting_")}  # fmt: skip
    return names - BESIDES


def task_options() -> set[str]:
    """The keywords a Task's enqueue takes as options (the others are payload fields)."""
    given = {name: None for name in JOB_OPTIONS} | {"a_field": 1}
    found, fields_left = _options_and_fields(given)
    assert fields_left == {"a_field": 1}
    return set(found)


def test_every_path_takes_every_job_option() -> None:
    paths: dict[str, set[str]] = {
        "JobQueue.enqueue": keywords(JobQueue.enqueue),
        "JobQueue.enqueue_sync": keywords(JobQueue.enqueue_sync),
        "Task.enqueue(_async) (**given)": task_options(),
        "WorkflowBuilder.add": keywords(WorkflowBuilder.add),
        "workflow step(**options)": keywords(step),
        "workflow step's check": set(_OPTIONS),
        "POST /jobs (NewJob)": set(NewJob.model_fields) - BESIDES,
        "fields.check_options": keywords(fields.check_options),
        "jobqueue enqueue": cli_enqueue_options(),
    }
    wrong = {path: sorted(set(JOB_OPTIONS) ^ got) for path, got in paths.items()
             if got != set(JOB_OPTIONS)}  # fmt: skip
    assert wrong == {}


def test_a_batch_takes_every_option_with_a_unique_key_per_payload() -> None:
    assert keywords(JobQueue.enqueue_many) == set(BATCH_OPTIONS) | {
        "unique_keys",
        "unique_for",
        "on_conflict",
    }
    assert set(BATCH_OPTIONS) == set(JOB_OPTIONS) - {"unique_key", "unique_for", "on_conflict"}


def test_a_misspelt_option_is_named() -> None:
    rows = Rows({}, load({}))
    with pytest.raises(TypeError, match=r"^unknown job options: delay$"):
        rows.options("report", {"delay": 5})


def test_a_batch_points_a_single_unique_key_to_unique_keys() -> None:
    jq = JobQueue(settings=load({}))
    batch = jq.enqueue_many("report", [{}], unique_key="k")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"unique_keys=\[\.\.\.\] gives each payload its own key"):
        asyncio.run(batch)
