"""An application whose handlers record when each attempt started and ended, by the
database's clock, in a spans table: the ledger the limits tests read."""

import asyncio
import os
from typing import Any

import asyncpg

from jobqueue import JobContext, JobQueue

jq = JobQueue()

SPANS_TABLE = (
    "(job_id bigint NOT NULL, attempt int NOT NULL, queue text NOT NULL, key text,"
    " pid int NOT NULL, started timestamptz NOT NULL, ended timestamptz)"
)


async def create_spans(conn: asyncpg.Connection, schema: str) -> None:
    await conn.execute(f'CREATE TABLE IF NOT EXISTS "{schema}".spans {SPANS_TABLE}')


_pools: dict[str, asyncpg.Pool] = {}


async def _pool() -> asyncpg.Pool:
    if "spans" not in _pools:
        _pools["spans"] = await asyncpg.create_pool(
            os.environ["DATABASE_URL"], min_size=1, max_size=10
        )
    return _pools["spans"]


async def span(payload: dict[str, Any], ctx: JobContext, queue: str) -> None:
    """Records its start, works for payload["ms"] milliseconds, records its end."""
    schema = os.environ["JOBQUEUE_SCHEMA"]
    pool = await _pool()
    await pool.execute(
        f'INSERT INTO "{schema}".spans (job_id, attempt, queue, key, pid, started)'
        " VALUES ($1, $2, $3, $4, $5, clock_timestamp())",
        ctx.id, ctx.attempt, queue, payload.get("tenant"), os.getpid(),
    )  # fmt: skip
    await asyncio.sleep(payload.get("ms", 20) / 1000)
    await pool.execute(
        f'UPDATE "{schema}".spans SET ended = clock_timestamp()'
        " WHERE job_id = $1 AND attempt = $2",
        ctx.id, ctx.attempt,
    )  # fmt: skip


@jq.task("limited", queue="limited")
async def limited(payload: dict[str, Any], ctx: JobContext) -> None:
    await span(payload, ctx, "limited")


@jq.task("keyed", queue="keyed", concurrency_key="tenant")
async def keyed(payload: dict[str, Any], ctx: JobContext) -> None:
    await span(payload, ctx, "keyed")


@jq.task("rated", queue="rated")
async def rated(payload: dict[str, Any], ctx: JobContext) -> None:
    await span(payload, ctx, "rated")
