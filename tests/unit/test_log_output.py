"""Where jobqueue's log lines go. As a library: through the standard logging module,
under ``jobqueue.*``, never on stdout, the application's handlers deciding the rest.
In a jobqueue process (``logs.configure``, as every command does): printed on stderr,
a traceback in Python's own format. Each in a process of its own, as logging is the
process's."""

from __future__ import annotations

import os
import re
import subprocess
import sys

ERROR = "[Errno 111] Connect call failed ('127.0.0.1', 5432)"
CLI = """
import logging, structlog
from jobqueue import logs
from jobqueue.db.migrate import log
logs.configure()
try:
    raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)")
except OSError as exc:
    {log}
"""
# What an application does: its own logging set up or not, then jobqueue's lines.
LIBRARY = """
import logging, sys
{setup}
from jobqueue import JobQueue
from jobqueue.db.migrate import log
JobQueue("postgresql://127.0.0.1:1/none")  # reads JOBQUEUE_LOG_LEVEL; connects to nothing
log.debug("migration planned", version=3)
log.info("migration applied", version=3, name="0003_more tables")
log.warning("database unavailable; retrying", error="refused")
"""


def run(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, **env},
    )


def test_a_traceback_is_printed_as_python_prints_it() -> None:
    out = run(
        CLI.format(log='structlog.get_logger("jobqueue.x").warning("job.retried", exc_info=exc)')
    ).stderr
    lines = out.splitlines()
    assert lines[0].endswith("job.retried")
    assert lines[1] == "Traceback (most recent call last):"
    assert lines[-1] == f"ConnectionRefusedError: {ERROR}"
    assert "╭" not in out  # no boxes of frames and their locals


def test_a_jobqueue_process_prints_its_lines_on_stderr_in_its_format() -> None:
    done = run(CLI.format(log='log.info("migration applied", version=3)'))
    assert done.stdout == ""
    assert re.fullmatch(r"\S+Z \[info +\] migration applied +version=3\n", done.stderr)


def test_a_library_writes_nothing_on_stdout_and_only_warnings_without_logging_set_up() -> None:
    done = run(LIBRARY.format(setup=""))
    assert done.stdout == ""
    # Python's last resort for an application that set nothing up: warnings, on stderr.
    assert done.stderr == "database unavailable; retrying error=refused\n"


def test_the_applications_logging_gets_the_lines_at_their_levels() -> None:
    setup = (
        "logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,"
        " format='%(levelname)s %(name)s: %(message)s')"
    )
    done = run(LIBRARY.format(setup=setup))
    assert done.stdout == ""
    # JOBQUEUE_LOG_LEVEL (info unless set) drops the debug line before logging sees it.
    assert done.stderr.splitlines() == [
        "INFO jobqueue.migrate: migration applied version=3 name='0003_more tables'",
        "WARNING jobqueue.migrate: database unavailable; retrying error=refused",
    ]
    quieter = run(LIBRARY.format(setup=setup), JOBQUEUE_LOG_LEVEL="warning")
    assert quieter.stderr.splitlines() == [
        "WARNING jobqueue.migrate: database unavailable; retrying error=refused",
    ]


def test_a_handler_on_the_jobqueue_logger_alone_gets_them() -> None:
    setup = (
        "handler = logging.StreamHandler(sys.stderr)\n"
        "handler.setFormatter(logging.Formatter('%(levelname)s %(message)s'))\n"
        "logging.getLogger('jobqueue').addHandler(handler)\n"
        "logging.getLogger('jobqueue').setLevel(logging.INFO)\n"
        "logging.getLogger('other').warning('not jobqueue')"
    )
    done = run(LIBRARY.format(setup=setup))
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "not jobqueue",  # the last resort's, for the logger with no handler
        "INFO migration applied version=3 name='0003_more tables'",
        "WARNING database unavailable; retrying error=refused",
    ]
