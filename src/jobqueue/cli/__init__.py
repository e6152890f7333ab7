"""The ``jobqueue`` command: each module beside this one adds a group of subcommands."""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
from collections.abc import Sequence

from jobqueue import release
from jobqueue.cli import (
    admin,
    audit,
    jobs,
    queues,
    schedules,
    service,
    settings,
    tokens,
    types,
    workers,
    workflows,
)
from jobqueue.cli.common import Run, UsageError
from jobqueue.config import ConfigError
from jobqueue.db.embedded import EmbeddedPostgresError
from jobqueue.db.migrate import MigrationLockTimeout
from jobqueue.db.pool import is_unavailable, pooler_refusal
from jobqueue.model.errors import DatabaseUnavailable
from jobqueue.model.job import JobNotFound, JobStateError
from jobqueue.server import StartupError

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:
        sys.exit(admin.run_bench(argv[1:]))
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Run = args.run
    try:
        code = run(args)
    except (ConfigError, UsageError) as exc:
        print(f"jobqueue: error: {exc}", file=sys.stderr)
        code = 2
    except (StartupError, MigrationLockTimeout, EmbeddedPostgresError, JobNotFound,
            JobStateError) as exc:  # fmt: skip
        print(f"jobqueue: error: {exc}", file=sys.stderr)
        code = 1
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and _stdout_gone():
            sys.exit(128 + signal.SIGPIPE)  # as a command killed by SIGPIPE (`| head`)
        refusal = pooler_refusal(exc)
        if refusal is not None:
            print(f"jobqueue: error: {refusal}", file=sys.stderr)
            sys.exit(1)
        if not is_unavailable(exc):
            raise
        # The Python API's own error says "database unavailable" already: its cause.
        cause = exc.cause if type(exc) is DatabaseUnavailable else None
        print(f"jobqueue: error: database unavailable: {cause or exc}", file=sys.stderr)
        code = 1
    sys.exit(code)


def _stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader left (`jobqueue ... | head`), not
    the database's socket: then stdout is pointed at /dev/null, so that nothing more is
    written there, not even at exit."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        gone = any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):  # no file descriptor to ask about
        return False
    if gone:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return gone


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobqueue",
        description="A background job service on PostgreSQL.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"jobqueue {release.version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # The help lists the commands in the order they are added: hence enqueue and jobs,
    # both of jobs.py, apart.
    service.add_service_commands(commands)
    admin.add_admin_commands(commands)
    jobs.add_enqueue_command(commands)
    workers.add_worker_commands(commands)
    queues.add_queue_commands(commands)
    jobs.add_jobs_commands(commands)
    workflows.add_workflow_commands(commands)
    tokens.add_token_commands(commands)
    types.add_type_commands(commands)
    schedules.add_schedule_commands(commands)
    audit.add_audit_command(commands)
    settings.add_settings_command(commands)
    return parser


class HelpFormatter(argparse.HelpFormatter):
    """argparse's, but a command's name as long as `workflows` still has its text beside
    it: argparse measures the commands without their indent, and puts the text of the
    longest on a line of its own."""

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction) and action.help != argparse.SUPPRESS:
            names = [self._format_action_invocation(a) for a in action._get_subactions()]
            indent = self._current_indent + self._indent_increment
            longest = max(map(len, names), default=0) + indent
            self._action_max_length = max(self._action_max_length, longest)
