"""The handlers of tests/acceptance/test_backups.py: each run of a job is a row of the
ledger table (ledger_app), so that a restored database's runs can be counted.

``before`` runs on the database that is backed up, ``jq`` on the restored one: only
``jq`` has a handler for ``finish``, so a workflow step of that type waits at the
backup, released but not run."""

import asyncio
from typing import Any

from ledger_app import record as ledger_record

from jobqueue import JobContext, JobQueue, RetryAt

record = ledger_record.fn

before = JobQueue()
jq = JobQueue()

for app in (before, jq):
    app.task("record")(record)

    @app.task("hold")
    async def hold(payload: dict[str, Any], ctx: JobContext) -> None:
        """Its first attempt runs until its process is killed; a rescued one ends."""
        await record(payload, ctx)
        if ctx.attempt == 1:
            await asyncio.sleep(3600)

    @app.task("flaky")
    async def flaky(payload: dict[str, Any], ctx: JobContext) -> None:
        """Its first attempt fails, to be retried after payload["retry_in"] seconds."""
        await record(payload, ctx)
        if ctx.attempt == 1:
            raise RetryAt("not yet", delay_seconds=payload["retry_in"])


jq.task("finish")(record)
