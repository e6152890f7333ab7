"""Handlers with every outcome a metric counts: completed, retried, failed, discarded,
and slow ones to kill a worker under."""

import asyncio
from typing import Any

from jobqueue import Discard, JobContext, JobQueue

jq = JobQueue()


@jq.task("ok")
async def ok(payload: dict[str, Any]) -> None:
    return None


@jq.task("flaky", max_attempts=3)
async def flaky(payload: dict[str, Any], ctx: JobContext) -> None:
    """Fails its first attempt, completes its second: one retried, one completed."""
    if ctx.attempt == 1:
        raise RuntimeError("first attempts fail")


@jq.task("doomed", max_attempts=2)
async def doomed(payload: dict[str, Any]) -> None:
    """Fails both attempts: one retried, one failed."""
    raise RuntimeError("always fails")


@jq.task("hopeless")
async def hopeless(payload: dict[str, Any]) -> None:
    raise Discard("never worth another attempt")


@jq.task("slow")
async def slow(payload: dict[str, Any]) -> None:
    await asyncio.sleep(payload.get("seconds", 1))
