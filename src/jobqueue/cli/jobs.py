"""``enqueue`` and ``jobs get|attempts|logs|retry|cancel|list``: one job, or many by filter."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from jobqueue.app import JobQueue
from jobqueue.audit import Actor
from jobqueue.cli.common import (
    Commands,
    Run,
    UsageError,
    add_output_flags,
    aware_time,
    client,
    key_values,
    with_jobqueue,
)
from jobqueue.cli.durable import add_signal_command, print_durable
from jobqueue.cli.job_edits import add_job_edit_commands
from jobqueue.cli.output import (
    format_time,
    print_fields,
    print_json,
    print_record,
    print_records,
    print_table,
)
from jobqueue.job_types import Checker
from jobqueue.model import fields, search
from jobqueue.model.job import FINAL_STATES, Attempt, Job, JobNotFound, JobStatus
from jobqueue.model.steps import JobDetail
from jobqueue.task import job_options

# How often ``jobs logs --follow`` looks for new lines (a worker writes them at most
# once per JOBQUEUE_PROGRESS_INTERVAL); the job's end wakes it at once.
FOLLOW_INTERVAL = 0.5


def add_enqueue_command(commands: Commands) -> None:
    cmd = commands.add_parser("enqueue", help="enqueue one job")
    cmd.add_argument("type", help="job type, e.g. send_email")
    cmd.add_argument("payload", nargs="?", default="{}", help="payload as a JSON object")
    cmd.add_argument("--queue")
    cmd.add_argument("--priority", type=int)
    cmd.add_argument("--max-attempts", type=int)
    cmd.add_argument("--run-at", help="ISO 8601 time with a zone, e.g. 2026-12-01T09:00:00Z")
    cmd.add_argument("--delay", type=float, help="seconds from now")
    cmd.add_argument("--unique-key", help="store nothing while a job with this key is active")
    cmd.add_argument("--unique-for", type=float, help="seconds the key holds after completion")
    cmd.add_argument(
        "--on-conflict",
        choices=["return", "replace", "debounce"],
        help="while a pending job holds the key: return it (default), replace its payload, "
        "priority and run time, or debounce it (run after --delay of quiet)",
    )
    cmd.add_argument(
        "--concurrency-key",
        help="its key for the queue's key limits (default: its task's payload field)",
    )
    add_tag_and_meta_flags(cmd, "tag the job (repeat for several)", "its metadata")
    cmd.add_argument(
        "--force",
        action="store_true",
        help="store the job even if no live worker of its queue has a handler for its type",
    )
    add_output_flags(cmd)
    cmd.set_defaults(run=run_enqueue)


def add_jobs_commands(commands: Commands) -> None:
    text = "inspect jobs; retry, cancel, change or delete them"
    jobs = commands.add_parser("jobs", help=text, description=text).add_subparsers(
        dest="jobs_command", required=True, metavar="COMMAND"
    )
    cmd = jobs.add_parser("get", help="show one job")
    cmd.add_argument("id", type=int)
    cmd.add_argument(
        "--wait",
        type=float,
        metavar="SECONDS",
        help="first wait up to SECONDS for the job to be completed, failed or cancelled",
    )
    add_output_flags(cmd)
    cmd.set_defaults(run=run_jobs_get)
    cmd = jobs.add_parser("attempts", help="show a job's failed attempts (and any that logged)")
    cmd.add_argument("id", type=int)
    add_output_flags(cmd)
    cmd.set_defaults(run=run_jobs_attempts)
    cmd = jobs.add_parser("logs", help="print what a job's handler logged, attempt by attempt")
    cmd.add_argument("id", type=int)
    cmd.add_argument("--attempt", type=int, metavar="N", help="only attempt N, without a header")
    cmd.add_argument(
        "--follow",
        action="store_true",
        help="print new lines as they are written, until the job is completed, failed or cancelled",
    )
    add_output_flags(cmd)
    cmd.set_defaults(run=run_jobs_logs)
    add_bulk_command(
        jobs,
        "retry",
        help="retry a failed or cancelled job, or every one matching filters",
        description="With an ID: that job. Without: every failed and cancelled job matching "
        "all the filters given (--all: every one).",
        every="every failed job",
        run=run_jobs_retry,
        by_finish_time=True,
    )
    add_bulk_command(
        jobs,
        "cancel",
        help="cancel a job, or every pending and running one matching filters",
        description="With an ID: that job. Without: every pending and running job matching "
        "all the filters given (--all: every one). Running jobs are asked to stop.",
        every="every active job",
        run=run_jobs_cancel,
    )
    cmd = jobs.add_parser("list", help="list jobs, newest first")
    cmd.add_argument("--status", choices=[s.value for s in JobStatus])
    cmd.add_argument("--type")
    cmd.add_argument("--queue")
    cmd.add_argument("--limit", type=int, default=50)
    cmd.add_argument("--after", type=int, help="list jobs older than this id")
    add_tag_and_meta_flags(cmd, "only jobs with this tag (repeat: with all)", "only jobs whose")
    cmd.add_argument(
        "--payload",
        action="append",
        metavar="KEY=VALUE",
        help=f"only jobs whose payload has VALUE at KEY (a dotted path); reads the newest "
        f"{search.PAYLOAD_SCAN_ROWS:,} jobs that match the rest, then says where it stopped",
    )
    add_output_flags(cmd)
    cmd.set_defaults(run=run_jobs_list)
    add_job_edit_commands(jobs)
    add_signal_command(jobs)


def run_enqueue(args: argparse.Namespace) -> int:
    try:
        payload = json.loads(args.payload)
    except json.JSONDecodeError as exc:
        raise UsageError(f"payload is not valid JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise UsageError('payload must be a JSON object, e.g. \'{"to": "a@example.com"}\'')
    run_at = None
    if args.run_at is not None:
        try:
            run_at = datetime.fromisoformat(args.run_at)
        except ValueError as exc:
            raise UsageError(f"--run-at must be an ISO 8601 time, got {args.run_at!r}") from exc
    jq = client(args)
    options: dict[str, Any] = {
        "queue": args.queue,
        "priority": args.priority,
        "max_attempts": args.max_attempts,
        "run_at": run_at,
        "delay_seconds": args.delay,
        "unique_key": args.unique_key,
        "unique_for": args.unique_for,
        "on_conflict": args.on_conflict,
        "concurrency_key": args.concurrency_key,
        "tags": args.tag,
        "meta": key_values("--meta", args.meta),
    }
    try:
        job_type = fields.check_type(args.type)
        fields.check_options(**options)
    except ValueError as exc:  # a rule of jobqueue.model.fields, naming the field
        raise UsageError(str(exc)) from exc

    async def enqueue() -> Job:
        await refuse_unrunnable(jq, job_type, args.queue, payload, force=args.force)
        return await jq.enqueue(job_type, payload, **options)

    try:
        job = with_jobqueue(jq, enqueue)
    except ValueError as exc:  # a rule of jobqueue.model.fields, naming the field
        raise UsageError(str(exc)) from exc
    if args.json:
        print_record(job)
    else:
        print(f"enqueued job {job.id} ({job.type}) in queue {job.queue}: {job.status}")
    return 0


async def refuse_unrunnable(
    jq: JobQueue, job_type: str, queue: str | None, payload: Any, *, force: bool
) -> None:
    """UsageError unless jobs of ``job_type`` in ``queue`` (None: the default) can run
    as given: a declared type's ``payload`` (None: not given) held to its schema, and
    else, unless ``force``, a live worker of the queue with a handler for the type. What
    `jobqueue enqueue` asks of its job and `jobqueue schedules` of a schedule's jobs."""
    declared = (await jq.types.checkers([job_type])).get(job_type)
    if declared is not None:
        if payload is not None:
            refuse_off_schema(declared, payload)
    elif not force:
        await refuse_unhandled(jq, job_type, job_options(None, jq.settings, queue)[0])


async def refuse_unhandled(jq: JobQueue, job_type: str, queue: str) -> None:
    """UsageError unless a live worker serving ``queue`` has a handler for ``job_type``:
    the CLI loads no application, so the workers' announcements (their rows in the
    workers table, migration 0024) are what says which types run. A declared type
    (`jobqueue types add`) is not asked this."""
    known = await jq.inspect.handled_types(queue)
    if job_type not in known:
        raise UsageError(
            f"no live worker of queue {queue} has a handler for type {job_type!r} "
            f"(known types: {', '.join(known) or 'none'}), and it is not declared "
            "(jobqueue types add); --force stores it anyway"
        )


def refuse_off_schema(declared: Checker, payload: Any) -> None:
    """UsageError naming where ``payload`` breaks its declared type's schema, if it does."""
    problems = declared.problems(payload)
    if problems:
        path, message = problems[0]
        where = ".".join(["payload", *(str(p) for p in path)])
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UsageError(f"{where}: {message}{more}")


# What ``jobs get`` shows after the job's fields, not among them (print_durable).
DURABLE_FIELDS = ("steps", "waiting_for", "spawned_by", "children")


def run_jobs_get(args: argparse.Namespace) -> int:
    if args.wait is not None and not args.wait > 0:
        raise UsageError(f"--wait must be a positive number of seconds, got {args.wait}")
    jq = client(args)

    async def read() -> JobDetail | None:
        if args.wait is None:
            job = await jq.get(args.id)
        else:
            try:
                job = await jq.wait(args.id, timeout=args.wait)
            except TimeoutError:  # not final yet: the job as it is, as GET ?wait= answers
                job = await jq.get(args.id)
        return None if job is None else await jq.detail(job)

    job = with_jobqueue(jq, read)
    if job is None:
        raise JobNotFound(args.id)
    if args.json:
        print_record(job)
        return 0
    print_fields(job, omit=DURABLE_FIELDS)
    print_durable(job)
    return 0


def run_jobs_attempts(args: argparse.Namespace) -> int:
    jq = client(args)

    async def read() -> tuple[Job | None, list[Attempt]]:
        return await jq.get(args.id), await jq.attempts(args.id)

    job, attempts = with_jobqueue(jq, read)
    if job is None:
        raise JobNotFound(args.id)
    if args.json:
        print_records(attempts)
        return 0
    header = ("ATTEMPT", "WORKER", "SECONDS", "ENDED", "ERROR")
    rows = [
        (str(a.attempt), a.worker_id or "", "" if a.seconds is None else f"{a.seconds:.3f}",
         "" if a.finished_at is None else format_time(a.finished_at), a.error or "")
        for a in attempts
    ]  # fmt: skip
    print_table(header, rows, f"job {args.id} has no failed attempt")
    return 0


def run_jobs_logs(args: argparse.Namespace) -> int:
    if args.attempt is not None and args.attempt < 1:
        raise UsageError(f"--attempt must be a positive integer, got {args.attempt}")
    if args.follow and args.json:
        raise UsageError("--follow prints lines as they come: leave out --json")
    jq = client(args)
    printed: dict[tuple[int, datetime | None], int] = {}  # characters of each attempt's log

    def show(attempts: list[Attempt]) -> None:
        for a in attempts:
            key = (a.attempt, a.started_at)
            text = a.log or ""
            done = printed.get(key)
            if done is None and text and args.attempt is None:
                sys.stdout.write(f"--- attempt {a.attempt}\n")
            sys.stdout.write(text[done or 0 :])
            printed[key] = len(text)
        sys.stdout.flush()

    async def read() -> list[Attempt]:
        while True:
            job = await jq.get(args.id)
            if job is None:
                raise JobNotFound(args.id)
            attempts = [a for a in await jq.attempts(args.id) if args.attempt in (None, a.attempt)]
            if args.json:
                return attempts
            show(attempts)
            if not args.follow or job.status in FINAL_STATES:
                return attempts
            with contextlib.suppress(TimeoutError):
                await jq.wait(args.id, timeout=FOLLOW_INTERVAL)

    attempts = with_jobqueue(jq, read)
    if args.json:
        print_records(attempts)
    elif not any(a.log for a in attempts):
        which = "" if args.attempt is None else f" attempt {args.attempt}"
        print(f"job {args.id}{which} has no log lines", file=sys.stderr)
    return 0


def run_jobs_retry(args: argparse.Namespace) -> int:
    finished_after = aware_time("--finished-after", args.finished_after)
    finished_before = aware_time("--finished-before", args.finished_before)
    filters = (args.type, args.queue, finished_after, finished_before)
    one_job_or_filters(args, filters, "--type, --queue, --finished-after/before")
    jq = client(args)
    if args.id is not None:
        job = with_jobqueue(jq, lambda: jq.retry(args.id, by=Actor.cli()))
        if args.json:
            print_record(job)
        else:
            print(f"job {job.id} ({job.type}) is pending again")
        return 0
    retried = with_jobqueue(
        jq,
        lambda: jq.retry_many(
            type=args.type,
            queue=args.queue,
            finished_after=finished_after,
            finished_before=finished_before,
            by=Actor.cli(),
        ),
    )
    if args.json:
        print_json({"retried": retried})
    else:
        print(f"{retried} job{'' if retried == 1 else 's'} pending again")
    return 0


def run_jobs_cancel(args: argparse.Namespace) -> int:
    one_job_or_filters(args, (args.type, args.queue), "--type, --queue")
    jq = client(args)
    if args.id is not None:
        job = with_jobqueue(jq, lambda: jq.cancel(args.id, by=Actor.cli()))
        if args.json:
            print_record(job)
        elif job.status == JobStatus.RUNNING:
            print(f"job {job.id} ({job.type}) is running: its worker was asked to stop it")
        else:
            print(f"job {job.id} ({job.type}) is cancelled")
        return 0
    counts = with_jobqueue(
        jq, lambda: jq.cancel_many(type=args.type, queue=args.queue, by=Actor.cli())
    )
    if args.json:
        print_json(counts)
    else:
        print(f"{counts['cancelled']} cancelled, {counts['requested']} running asked to stop")
    return 0


def run_jobs_list(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 10_000:
        raise UsageError(f"--limit must be from 1 to 10000, got {args.limit}")
    try:
        where = search.JobFilter(
            JobStatus(args.status) if args.status else None,
            None if args.type is None else [args.type],
            None if args.queue is None else [args.queue],
            search.check_tags(args.tag),
            key_values("--meta", args.meta),
            key_values("--payload", args.payload),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    jq = client(args)
    page = with_jobqueue(jq, lambda: jq.inspect.jobs(where, after=args.after, limit=args.limit))
    if args.json:
        print_records(page.jobs)
    else:
        header = ("ID", "TYPE", "QUEUE", "STATUS", "ATTEMPTS", "RUN AT", "TAGS", "LAST ERROR")
        rows = [
            (str(j.id), j.type, j.queue, j.status, f"{j.attempts}/{j.max_attempts}",
             format_time(j.run_at), ",".join(j.tags), (j.last_error or "")[:50])
            for j in page.jobs
        ]  # fmt: skip
        print_table(header, rows, "no jobs")
    if page.truncated:
        print(f"the payload filter read {search.PAYLOAD_SCAN_ROWS:,} jobs and stopped; "
              f"older ones: --after {page.next_after}", file=sys.stderr)  # fmt: skip
    return 0


def add_tag_and_meta_flags(cmd: argparse.ArgumentParser, tag: str, meta: str) -> None:
    cmd.add_argument("--tag", action="append", metavar="TAG", help=tag)
    cmd.add_argument(
        "--meta",
        action="append",
        metavar="KEY=VALUE",
        help=f"{meta} metadata has VALUE at KEY (repeat for several): a JSON number, "
        'true, false or null, a "quoted" string, else text',
    )


def add_bulk_command(
    jobs: Commands,
    name: str,
    *,
    help: str,
    description: str,
    every: str,
    run: Run,
    by_finish_time: bool = False,
) -> None:
    """A command that takes one job's ID, or filters, or --all: see one_job_or_filters."""
    cmd = jobs.add_parser(name, help=help, description=description)
    cmd.add_argument("id", type=int, nargs="?")
    cmd.add_argument("--type")
    cmd.add_argument("--queue")
    if by_finish_time:
        cmd.add_argument("--finished-after", metavar="TIME", help="ISO 8601, with a time zone")
        cmd.add_argument("--finished-before", metavar="TIME", help="ISO 8601, with a time zone")
    cmd.add_argument("--all", action="store_true", help=f"no filter: {every}")
    add_output_flags(cmd)
    cmd.set_defaults(run=run)


def one_job_or_filters(args: argparse.Namespace, filters: Iterable[object], names: str) -> None:
    """A bulk command takes a job ID, or filters, or --all: exactly one of them."""
    given = any(v is not None for v in filters) or args.all
    if args.id is not None and given:
        raise UsageError("give a job ID or filters, not both")
    if args.id is None and not given:
        raise UsageError(f"give a job ID, filters ({names}) or --all")
