"""The ledger of ledger_app, written over a connection of the handler's own to
LEDGER_DATABASE_URL: a test can cut jobqueue off from the database (DATABASE_URL)
while the handlers' own writes still get through."""

import os
from typing import Any

import asyncpg

from jobqueue import JobContext, JobQueue

jq = JobQueue()

_pools: dict[str, asyncpg.Pool] = {}


@jq.task("record")
async def record(payload: dict[str, Any], ctx: JobContext) -> None:
    if "ledger" not in _pools:
        _pools["ledger"] = await asyncpg.create_pool(
            os.environ["LEDGER_DATABASE_URL"], min_size=1, max_size=4
        )
    schema = os.environ["JOBQUEUE_SCHEMA"]
    await _pools["ledger"].execute(
        f'INSERT INTO "{schema}".ledger (job_id, attempt, pid) VALUES ($1, $2, $3)',
        ctx.id,
        ctx.attempt,
        os.getpid(),
    )
