"""An application whose handler records every (job id, attempt) it runs in a ledger table."""

import asyncio
import os
from typing import Any

import asyncpg

from jobqueue import JobContext, JobQueue

jq = JobQueue()

# The table the handlers write, created by the tests in their schema.
LEDGER_TABLE = "(job_id bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL)"


async def create_ledger(conn: asyncpg.Connection, schema: str) -> None:
    await conn.execute(f'CREATE TABLE IF NOT EXISTS "{schema}".ledger {LEDGER_TABLE}')


_pools: dict[str, asyncpg.Pool] = {}


async def _pool() -> asyncpg.Pool:
    if "ledger" not in _pools:
        _pools["ledger"] = await asyncpg.create_pool(
            os.environ["DATABASE_URL"], min_size=1, max_size=4
        )
    return _pools["ledger"]


@jq.task("record")
async def record(payload: dict[str, Any], ctx: JobContext) -> None:
    schema = os.environ["JOBQUEUE_SCHEMA"]
    pool = await _pool()
    await pool.execute(
        f'INSERT INTO "{schema}".ledger (job_id, attempt, pid) VALUES ($1, $2, $3)',
        ctx.id,
        ctx.attempt,
        os.getpid(),
    )


@jq.task("record_slow")
async def record_slow(payload: dict[str, Any], ctx: JobContext) -> None:
    """Records its attempt, then works for payload["ms"] milliseconds."""
    await record(payload, ctx)
    await asyncio.sleep(payload["ms"] / 1000)
