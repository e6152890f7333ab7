"""The soak's handlers (bench/soak.py): each job that ends well writes its id to a
ledger table, which retention does not touch, so that no job can be lost unseen.

The ledger's rows are written in batches, every LEDGER_FLUSH seconds, by one task per
process: a row per job would double the soak's commits, and the soak measures
jobqueue, not its ledger."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import asyncpg

from jobqueue import JobContext, JobQueue, RetryAt

jq = JobQueue()

LEDGER_FLUSH = 0.2
_done: list[int] = []
_flusher: asyncio.Task[None] | None = None


@jq.task("ok")
async def ok(payload: dict[str, Any], ctx: JobContext) -> None:
    await recorded(ctx.id)


@jq.task("flaky")
async def flaky(payload: dict[str, Any], ctx: JobContext) -> None:
    """Fails its first attempt, retried a second later."""
    if ctx.attempt == 1:
        raise RetryAt("the partner answered 503", delay_seconds=1)
    await recorded(ctx.id)


@jq.task("slow")
async def slow(payload: dict[str, Any], ctx: JobContext) -> None:
    await asyncio.sleep(payload["seconds"])
    await recorded(ctx.id)


async def recorded(job_id: int) -> None:
    global _flusher
    _done.append(job_id)
    if _flusher is None:
        _flusher = asyncio.create_task(flush())


async def flush() -> None:
    schema = os.environ["JOBQUEUE_SCHEMA"]
    conn = await asyncpg.connect(os.environ["DATABASE_URL"])
    while True:
        await asyncio.sleep(LEDGER_FLUSH)
        if _done:
            ids = _done[:]
            del _done[: len(ids)]
            await conn.execute(
                f'INSERT INTO "{schema}".soak_ledger (job_id) SELECT unnest($1::bigint[])', ids
            )
