"""The ``jobqueue`` command."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import runpy
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from jobqueue import config, logs, supervisor
from jobqueue.app import JobQueue
from jobqueue.config import ConfigError, Settings
from jobqueue.db.embedded import EmbeddedPostgresError
from jobqueue.db.pool import is_unavailable
from jobqueue.job import Attempt, Job, JobNotFound, JobStateError, JobStatus
from jobqueue.server import Roles, StartupError, load_app, serve

# Flags every command takes: they say where the database is.
DATABASE_SETTINGS = ("database_url", "schema", "data_dir", "log_level", "log_format")


class UsageError(Exception):
    """Bad input on the command line; the message is one line."""


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:
        sys.exit(run_bench(argv[1:]))
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.run(args)
    except (ConfigError, UsageError) as exc:
        print(f"jobqueue: error: {exc}", file=sys.stderr)
        code = 2
    except (StartupError, EmbeddedPostgresError, JobNotFound, JobStateError) as exc:
        print(f"jobqueue: error: {exc}", file=sys.stderr)
        code = 1
    except Exception as exc:
        if not is_unavailable(exc):
            raise
        print(f"jobqueue: error: database unavailable: {exc}", file=sys.stderr)
        code = 1
    sys.exit(code)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobqueue", description="A background job service on PostgreSQL."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for name, roles, text in (
        ("serve", Roles(api=True, worker=True), "HTTP API and workers in one process"),
        ("worker", Roles(api=False, worker=True), "workers only"),
        ("api", Roles(api=True, worker=False), "HTTP API only"),
    ):
        cmd = commands.add_parser(name, help=text, description=text)
        add_setting_flags(cmd, None)
        cmd.add_argument(
            "--no-migrate",
            dest="migrate",
            action="store_const",
            const="false",
            help="do not apply the schema at start-up",
        )
        if roles.worker:
            cmd.add_argument(
                "--queue",
                action="append",
                dest="queue_entries",
                metavar="NAME[=N]",
                help="serve this queue, at most N of its jobs at once if given; repeatable "
                "(the same as JOBQUEUE_QUEUES, which it replaces)",
            )
        if name == "worker":
            cmd.add_argument(
                "--processes",
                default="1",
                metavar="N",
                help="run N worker processes, e.g. one per core (default 1)",
            )
        cmd.set_defaults(run=run_service, roles=roles)

    commands.add_parser(
        "bench", add_help=False, help="measure throughput and latency, with peers (--help)"
    )

    cmd = commands.add_parser("migrate", help="apply the schema and exit")
    add_setting_flags(cmd, DATABASE_SETTINGS)
    cmd.set_defaults(run=run_migrate)

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
    add_output_flags(cmd)
    cmd.set_defaults(run=run_enqueue)

    cmd = commands.add_parser("workers", help="list the worker processes")
    add_output_flags(cmd)
    cmd.set_defaults(run=run_workers)

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

    jobs = commands.add_parser("jobs", help="inspect jobs").add_subparsers(
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
    cmd = jobs.add_parser("attempts", help="show a job's failed attempts, oldest first")
    cmd.add_argument("id", type=int)
    add_output_flags(cmd)
    cmd.set_defaults(run=run_jobs_attempts)
    cmd = jobs.add_parser(
        "retry",
        help="retry a failed or cancelled job, or every one matching filters",
        description="With an ID: that job. Without: every failed and cancelled job matching "
        "all the filters given (--all: every one).",
    )
    cmd.add_argument("id", type=int, nargs="?")
    cmd.add_argument("--type")
    cmd.add_argument("--queue")
    cmd.add_argument("--finished-after", metavar="TIME", help="ISO 8601, with a time zone")
    cmd.add_argument("--finished-before", metavar="TIME", help="ISO 8601, with a time zone")
    cmd.add_argument("--all", action="store_true", help="no filter: every failed job")
    add_output_flags(cmd)
    cmd.set_defaults(run=run_jobs_retry)
    cmd = jobs.add_parser(
        "cancel",
        help="cancel a job, or every pending and running one matching filters",
        description="With an ID: that job. Without: every pending and running job matching "
        "all the filters given (--all: every one). Running jobs are asked to stop.",
    )
    cmd.add_argument("id", type=int, nargs="?")
    cmd.add_argument("--type")
    cmd.add_argument("--queue")
    cmd.add_argument("--all", action="store_true", help="no filter: every active job")
    add_output_flags(cmd)
    cmd.set_defaults(run=run_jobs_cancel)
    cmd = jobs.add_parser("list", help="list jobs, newest first")
    cmd.add_argument("--status", choices=[s.value for s in JobStatus])
    cmd.add_argument("--type")
    cmd.add_argument("--queue")
    cmd.add_argument("--limit", type=int, default=50)
    cmd.add_argument("--after", type=int, help="list jobs older than this id")
    add_output_flags(cmd)
    cmd.set_defaults(run=run_jobs_list)
    return parser


def add_setting_flags(cmd: argparse.ArgumentParser, only: Sequence[str] | None) -> None:
    group = cmd.add_argument_group("settings (each also an environment variable)")
    for f in config.env_settings():
        if only is None or f.name in only:
            group.add_argument(
                config.flag_name(f),
                dest=f"setting_{f.name}",
                metavar=f.metadata["env"],
                help=f"{f.metadata['doc']} Default: {f.default!r}.".replace("%", "%%"),
            )


def add_output_flags(cmd: argparse.ArgumentParser) -> None:
    add_setting_flags(cmd, DATABASE_SETTINGS)
    cmd.add_argument("--json", action="store_true", help="print JSON for scripts")


def settings_from(args: argparse.Namespace) -> Settings:
    flags = {
        key.removeprefix("setting_"): value
        for key, value in vars(args).items()
        if key.startswith("setting_") and value is not None
    }
    if getattr(args, "migrate", None) == "false":
        flags["migrate"] = "false"
    if getattr(args, "queue_entries", None):
        flags["queues"] = ",".join(args.queue_entries)
    return config.load(flags=flags)


# -- commands -------------------------------------------------------------------


def run_service(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    logs.configure(settings.log_level, settings.log_format)
    processes = config.positive_int("--processes", getattr(args, "processes", "1"))
    if processes > 1:
        return supervisor.run(settings, processes)
    jq = load_app(settings.app)
    if settings.database_url is None and jq.settings.database_url:
        # A DSN written into the application's JobQueue(...) holds unless overridden.
        settings = dataclasses.replace(settings, database_url=jq.settings.database_url)
    jq.settings = settings
    try:
        code = asyncio.run(serve(jq, args.roles))
    finally:
        jq.close_sync()
    exit_despite_stuck_threads(code)
    return code


def exit_despite_stuck_threads(code: int) -> None:
    """A sync handler still running in a thread cannot be stopped, and Python would wait
    for it at exit; its job is already handed back, so leave without it."""
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        if not any(t.name.startswith("jobqueue-handler") for t in threading.enumerate()):
            return
        time.sleep(0.05)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_bench(argv: list[str]) -> int:
    """The benchmark lives in the source checkout's bench/, beside its peer runners."""
    script = Path(__file__).resolve().parents[2] / "bench" / "run.py"
    if not script.is_file():
        print("jobqueue: error: jobqueue bench runs from a source checkout", file=sys.stderr)
        return 2
    bench = runpy.run_path(str(script), run_name="jobqueue_bench")
    code: int = bench["main"](argv)
    return code


def run_migrate(args: argparse.Namespace) -> int:
    jq = client(args)
    applied = with_jobqueue(jq, lambda: jq.migrate())
    print(f"applied migrations: {', '.join(map(str, applied))}" if applied else "schema up to date")
    return 0


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
    try:
        job = with_jobqueue(
            jq,
            lambda: jq.enqueue(
                args.type,
                payload,
                queue=args.queue,
                priority=args.priority,
                max_attempts=args.max_attempts,
                run_at=run_at,
                delay_seconds=args.delay,
                unique_key=args.unique_key,
                unique_for=args.unique_for,
            ),
        )
    except ValueError as exc:  # a rule of jobqueue.fields, naming the field
        raise UsageError(str(exc)) from exc
    if args.json:
        from jobqueue.encoding import to_json

        print(to_json(job).decode())
    else:
        print(f"enqueued job {job.id} ({job.type}) in queue {job.queue}: {job.status}")
    return 0


def run_jobs_get(args: argparse.Namespace) -> int:
    if args.wait is not None and not args.wait > 0:
        print(f"jobqueue: error: --wait must be a positive number of seconds, got {args.wait}",
              file=sys.stderr)  # fmt: skip
        return 2
    jq = client(args)

    async def read() -> Job | None:
        if args.wait is None:
            return await jq.get(args.id)
        try:
            return await jq.wait(args.id, timeout=args.wait)
        except JobNotFound:
            return None
        except TimeoutError:  # not final yet: the job as it is, as GET ?wait= answers
            return await jq.get(args.id)

    job = with_jobqueue(jq, read)
    if job is None:
        print(f"jobqueue: error: job {args.id} not found", file=sys.stderr)
        return 1
    from jobqueue.encoding import to_json, to_jsonable

    if args.json:
        print(to_json(job).decode())
    else:
        for key, value in to_jsonable(job).items():
            shown = json.dumps(value) if key in ("payload", "result", "progress") else value
            print(f"{key:>19}: {shown}")
    return 0


def run_jobs_attempts(args: argparse.Namespace) -> int:
    jq = client(args)

    async def read() -> tuple[Job | None, list[Attempt]]:
        return await jq.get(args.id), await jq.attempts(args.id)

    job, attempts = with_jobqueue(jq, read)
    if job is None:
        print(f"jobqueue: error: job {args.id} not found", file=sys.stderr)
        return 1
    if args.json:
        from jobqueue.encoding import to_jsonable

        print(json.dumps([to_jsonable(a) for a in attempts]))
        return 0
    rows = [("ATTEMPT", "WORKER", "SECONDS", "ENDED", "ERROR")]
    rows += [
        (str(a.attempt), a.worker_id or "", "" if a.seconds is None else f"{a.seconds:.3f}",
         a.finished_at.strftime("%Y-%m-%d %H:%M:%S"), a.error)
        for a in attempts
    ]  # fmt: skip
    print_rows(rows) if attempts else print(f"job {args.id} has no failed attempt")
    return 0


def run_jobs_retry(args: argparse.Namespace) -> int:
    filters = {
        "type": args.type,
        "queue": args.queue,
        "finished_after": aware_time("--finished-after", args.finished_after),
        "finished_before": aware_time("--finished-before", args.finished_before),
    }
    one_job_or_filters(args, filters.values(), "--type, --queue, --finished-after/before")
    jq = client(args)
    if args.id is not None:
        job = with_jobqueue(jq, lambda: jq.retry(args.id))
        if args.json:
            from jobqueue.encoding import to_json

            print(to_json(job).decode())
        else:
            print(f"job {job.id} ({job.type}) is pending again")
        return 0
    retried = with_jobqueue(jq, lambda: jq.retry_many(**filters))
    plural = "" if retried == 1 else "s"
    print(json.dumps({"retried": retried}) if args.json else f"{retried} job{plural} pending again")
    return 0


def run_jobs_cancel(args: argparse.Namespace) -> int:
    one_job_or_filters(args, (args.type, args.queue), "--type, --queue")
    jq = client(args)
    if args.id is not None:
        job = with_jobqueue(jq, lambda: jq.cancel(args.id))
        if args.json:
            from jobqueue.encoding import to_json

            print(to_json(job).decode())
        elif job.status == JobStatus.RUNNING:
            print(f"job {job.id} ({job.type}) is running: its worker was asked to stop it")
        else:
            print(f"job {job.id} ({job.type}) is cancelled")
        return 0
    counts = with_jobqueue(jq, lambda: jq.cancel_many(type=args.type, queue=args.queue))
    if args.json:
        print(json.dumps(counts))
    else:
        print(f"{counts['cancelled']} cancelled, {counts['requested']} running asked to stop")
    return 0


def one_job_or_filters(args: argparse.Namespace, filters: Iterable[Any], names: str) -> None:
    """A bulk command takes a job ID, or filters, or --all: exactly one of them."""
    given = any(v is not None for v in filters) or args.all
    if args.id is not None and given:
        raise UsageError("give a job ID or filters, not both")
    if args.id is None and not given:
        raise UsageError(f"give a job ID, filters ({names}) or --all")


def aware_time(flag: str, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise UsageError(f"{flag} must be an ISO 8601 time, got {value!r}") from exc
    if parsed.tzinfo is None:
        raise UsageError(f"{flag} needs a time zone, e.g. {value}Z or {value}+01:00")
    return parsed


def run_jobs_list(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 10_000:
        raise UsageError(f"--limit must be from 1 to 10000, got {args.limit}")
    jq = client(args)
    jobs = with_jobqueue(
        jq,
        lambda: jq.list(
            status=args.status,
            type=args.type,
            queue=args.queue,
            after=args.after,
            limit=args.limit,
        ),
    )
    if args.json:
        from jobqueue.encoding import to_jsonable

        print(json.dumps([to_jsonable(j) for j in jobs]))
    else:
        print_table(jobs)
    return 0


def run_queues(args: argparse.Namespace) -> int:
    action = getattr(args, "queues_command", None)
    jq = client(args)
    try:
        if action == "pause":
            queues = [with_jobqueue(jq, lambda: jq.pause(args.name))]
        elif action == "resume":
            queues = [with_jobqueue(jq, lambda: jq.resume(args.name))]
        else:
            queues = with_jobqueue(jq, lambda: jq.queues())
    except ValueError as exc:  # a queue name that breaks the rule
        raise UsageError(str(exc)) from exc
    if args.json:
        from jobqueue.encoding import to_jsonable

        print(json.dumps([to_jsonable(q) for q in queues]))
        return 0
    rows = [("QUEUE", "PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "OLDEST", "STATE")]
    rows += [
        (q.name, str(q.pending), str(q.running), str(q.completed), str(q.failed),
         str(q.cancelled),
         "" if q.oldest_pending_seconds is None else f"{q.oldest_pending_seconds:.1f}s",
         "paused" if q.paused else "active")
        for q in queues
    ]  # fmt: skip
    print_rows(rows) if queues else print("no queues")
    return 0


def run_workers(args: argparse.Namespace) -> int:
    jq = client(args)
    workers = with_jobqueue(jq, lambda: jq.workers())
    if args.json:
        from jobqueue.encoding import to_jsonable

        print(json.dumps([to_jsonable(w) for w in workers]))
        return 0
    rows = [("ID", "HOST", "PID", "QUEUES", "RUNNING", "LAST HEARTBEAT")]
    rows += [
        (w.id, w.host, str(w.pid), ",".join(w.queues), f"{w.running}/{w.slots}",
         w.heartbeat_at.strftime("%Y-%m-%d %H:%M:%S"))
        for w in workers
    ]  # fmt: skip
    print_rows(rows) if workers else print("no workers")
    return 0


# -- helpers ----------------------------------------------------------------------


def client(args: argparse.Namespace) -> JobQueue:
    settings = settings_from(args)
    logs.configure("warning", settings.log_format)
    return JobQueue(settings=settings)


def with_jobqueue(jq: JobQueue, call: Callable[[], Any]) -> Any:
    async def run() -> Any:
        async with jq:
            return await call()

    return asyncio.run(run())


def print_table(jobs: list[Job]) -> None:
    if not jobs:
        print("no jobs")
        return
    rows = [("ID", "TYPE", "QUEUE", "STATUS", "ATTEMPTS", "RUN AT", "LAST ERROR")]
    for j in jobs:
        rows.append(
            (
                str(j.id),
                j.type,
                j.queue,
                j.status,
                f"{j.attempts}/{j.max_attempts}",
                j.run_at.strftime("%Y-%m-%d %H:%M:%S"),
                (j.last_error or "")[:50],
            )
        )
    print_rows(rows)


def print_rows(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
