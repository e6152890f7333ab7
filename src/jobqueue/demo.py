"""The built-in demo tasks, active when no application is given (``--app``/``JOBQUEUE_APP``)."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from jobqueue.app import JobQueue

log = structlog.get_logger("jobqueue.demo")

jq = JobQueue()


@jq.task("send_email")
async def send_email(payload: dict[str, Any]) -> None:
    """Simulated: logs the message it would send."""
    log.info("Sending email (simulated)", to=payload.get("to"), subject=payload.get("subject"))
    await asyncio.sleep(0.01)


@jq.task("fail_test")
def fail_test(payload: dict[str, Any]) -> None:
    """Always fails, to watch retries and the dead-letter state."""
    raise RuntimeError("fail_test always fails")


@jq.task("sleep")
async def sleep(payload: dict[str, Any]) -> None:
    """Sleeps ``{"seconds": x}`` (default 1): a long job for trying shutdown."""
    await asyncio.sleep(float(payload.get("seconds", 1)))


@jq.task("noop")
async def noop(payload: dict[str, Any]) -> None:
    """Does nothing: for measuring the queue itself."""
