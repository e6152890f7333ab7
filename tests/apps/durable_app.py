"""An application of durable handlers whose steps and items record their side effects
in a ledger table, and whose first attempt stops (long enough to be killed) at a point
it announces in its log."""

import asyncio
import os
from typing import Any

import asyncpg

from jobqueue import JobContext, JobQueue

jq = JobQueue()

# Created by the tests in their schema: one row per side effect.
LEDGER_TABLE = "(job_id bigint NOT NULL, what text NOT NULL, attempt int NOT NULL)"

_pools: dict[str, asyncpg.Pool] = {}


async def create_ledger(conn: asyncpg.Connection, schema: str) -> None:
    await conn.execute(f'CREATE TABLE IF NOT EXISTS "{schema}".ledger {LEDGER_TABLE}')


async def _record(ctx: JobContext, what: str) -> None:
    if "ledger" not in _pools:
        _pools["ledger"] = await asyncpg.create_pool(
            os.environ["DATABASE_URL"], min_size=1, max_size=2
        )
    schema = os.environ["JOBQUEUE_SCHEMA"]
    await _pools["ledger"].execute(
        f'INSERT INTO "{schema}".ledger (job_id, what, attempt) VALUES ($1, $2, $3)',
        ctx.id,
        what,
        ctx.attempt,
    )


@jq.task("five_steps")
async def five_steps(payload: dict[str, Any], ctx: JobContext) -> list[int]:
    """Five steps; on its first attempt, step 3 records its side effect and then hangs."""

    async def step(n: int) -> int:
        await _record(ctx, f"step {n}")
        if n == 3 and ctx.attempt == 1:
            ctx.log.info("step 3 of job hangs", hung_job=ctx.id)
            await asyncio.sleep(600)
        return n * 10

    return [await ctx.step(f"step-{n}", step, n) for n in range(1, 6)]


@jq.task("thousand_items")
async def thousand_items(payload: dict[str, Any], ctx: JobContext) -> int:
    """Records each of 1,000 items, checkpointing every 100; on its first attempt it
    hangs at item 450."""
    done = 0
    async for item in ctx.iterate(range(1000), every=100):
        await _record(ctx, f"item {item}")
        if item == 450 and ctx.attempt == 1:
            ctx.log.info("item 450 of job hangs", hung_job=ctx.id)
            await asyncio.sleep(600)
        done += 1
    return done


@jq.task("pack")
async def pack(payload: dict[str, Any]) -> str:
    return f"box-{payload['item']}"


@jq.task("order_flow")
async def order_flow(payload: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """docs/durable.md's worked example: a payment step, a wait for a person's approval
    (a signal), then one child job per item, waited for."""

    async def charge() -> str:
        return f"ch-{payload['order']}"

    charged = await ctx.step("charge", charge)
    approval = await ctx.wait_for_signal("approved", timeout=3600)
    boxes = await ctx.wait_for(await ctx.spawn([("pack", {"item": i}) for i in payload["items"]]))
    return {"charge": charged, "approved_by": approval["by"], "boxes": boxes}


@jq.task("fan_child")
async def fan_child(payload: dict[str, Any]) -> int:
    return int(payload["n"])


@jq.task("fan_parent")
async def fan_parent(payload: dict[str, Any], ctx: JobContext) -> list[int]:
    """Five children, waited for; the run that gets their results records its end."""
    base = payload["base"]
    children = await ctx.spawn([("fan_child", {"n": base + i}) for i in range(5)])
    results = await ctx.wait_for(children)
    await _record(ctx, "parent ended")
    return [int(r) for r in results]
