"""Handlers for the dashboard's browser tests: one that fails until a file exists
(relative to the server's working directory: the test's tmp_path), logging each
attempt, one that fails and retries an hour later, one that reports progress, and a
quick one."""

import asyncio
from pathlib import Path
from typing import Any

from jobqueue import FixedDelay, JobContext, JobQueue

jq = JobQueue()


@jq.task("flaky", max_attempts=2)
def flaky(payload: dict[str, Any], ctx: JobContext) -> dict[str, str]:
    ctx.log.info("checking the mail server", attempt=ctx.attempt)
    if not Path(payload["fixed_when"]).exists():
        raise ConnectionError(f"mail server down (attempt {ctx.attempt})")
    return {"sent": "yes"}


@jq.task("unreachable", max_attempts=3, retry=FixedDelay(3600))
def unreachable(payload: dict[str, Any]) -> None:
    raise ConnectionError("crm unreachable")


@jq.task("slow")
async def slow(payload: dict[str, Any], ctx: JobContext) -> dict[str, float]:
    steps = int(payload.get("steps", 10))
    for step in range(steps):
        ctx.progress((step + 1) / steps, f"step {step + 1} of {steps}")
        await asyncio.sleep(float(payload.get("step_seconds", 0.3)))
    return {"steps": steps}


@jq.task("nightly", cron="0 3 * * *")
async def nightly(payload: dict[str, Any]) -> None:
    return None


@jq.task("quick")
async def quick(payload: dict[str, Any]) -> dict[str, Any]:
    return {"echo": payload}


@jq.task("box")
async def box(payload: dict[str, Any]) -> str:
    return f"box-{payload['item']}"


@jq.task("approve_and_pack")
async def approve_and_pack(payload: dict[str, Any], ctx: JobContext) -> list[Any]:
    """Waits for a signal, then for one child per item: its page shows what it waits
    for, then its children, each page linking back to it."""
    await ctx.wait_for_signal("approved")
    return await ctx.wait_for(await ctx.spawn([("box", {"item": i}) for i in payload["items"]]))


@jq.task("fulfil", max_attempts=2, retry=FixedDelay(0.2))
async def fulfil(payload: dict[str, Any], ctx: JobContext) -> dict[str, str]:
    """A durable handler: two steps, a checkpoint, and a first attempt that fails after
    them, so that its page shows steps recorded by attempt 1 and replayed by attempt 2."""
    charge = await ctx.step("charge", lambda: {"id": "ch-7"})
    label = await ctx.step("label", lambda: {"tracking": "1Z999"})
    await ctx.checkpoint({"shipped": 1})
    if ctx.attempt == 1:
        raise ConnectionError("the mail server hung up")
    return {"charge": charge["id"], "tracking": label["tracking"]}
