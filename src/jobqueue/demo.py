"""The built-in demo tasks, active when no application is given (``--app``/``JOBQUEUE_APP``)."""

from __future__ import annotations

import asyncio
from typing import Any

from jobqueue.app import JobQueue
from jobqueue.context import JobContext

jq = JobQueue()


@jq.task("send_email")
async def send_email(payload: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Simulated: logs the message it would send (kept as the job's log too); its result
    names the recipient."""
    ctx.log.info("Sending email (simulated)", to=payload.get("to"), subject=payload.get("subject"))
    await asyncio.sleep(0.01)
    return {"sent_to": payload.get("to")}


@jq.task("fail_test")
def fail_test(payload: dict[str, Any]) -> None:
    """Always fails, to watch retries and the dead-letter state."""
    raise RuntimeError("fail_test always fails")


@jq.task("sleep")
async def sleep(payload: dict[str, Any], ctx: JobContext) -> dict[str, float]:
    """Sleeps ``{"seconds": x}`` (default 1), reporting its progress in tenths: a long
    job for trying progress, waiting and shutdown."""
    seconds = float(payload.get("seconds", 1))
    for tenth in range(1, 11):
        await asyncio.sleep(seconds / 10)
        ctx.progress(tenth / 10, f"slept {seconds * tenth / 10:g}s of {seconds:g}s")
    return {"slept_seconds": seconds}


@jq.task("noop")
async def noop(payload: dict[str, Any]) -> None:
    """Does nothing: for measuring the queue itself."""
