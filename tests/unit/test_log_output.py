"""The console log's tracebacks: Python's own format, and none at all for asyncpg's
pool reporting a failed reconnection (an outage, which jobqueue reports in a line).
Each in a process of its own, as a jobqueue command configures its logging."""

from __future__ import annotations

import subprocess
import sys

ERROR = "[Errno 111] Connect call failed ('127.0.0.1', 5432)"
SCRIPT = """
import logging, structlog
from jobqueue import logs
logs.configure()
try:
    raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)")
except OSError as exc:
    {log}
"""


def logged(statement: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(log=statement)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stderr


def test_a_traceback_is_printed_as_python_prints_it() -> None:
    out = logged('structlog.get_logger("jobqueue.x").warning("job.retried", exc_info=exc)')
    lines = out.splitlines()
    assert lines[0].endswith("job.retried")
    assert lines[1] == "Traceback (most recent call last):"
    assert lines[-1] == f"ConnectionRefusedError: {ERROR}"
    assert "╭" not in out  # no boxes of frames and their locals


def test_the_pools_failed_reconnection_is_one_line_with_its_error() -> None:
    out = logged(
        'logging.getLogger("asyncpg.pool").warning('
        '"Failed to restore the pool connection floor; retrying", exc_info=True)'
    )
    assert out.count("\n") == 1, out
    assert out.rstrip().endswith(
        f"Failed to restore the pool connection floor; retrying: {ERROR} [asyncpg.pool]"
    )
