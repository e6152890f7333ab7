"""An application that runs ``jq.worker()`` (migrating the schema first) in its own
process: jobqueue writes nothing on its stdout, and its lines reach the application's
logging handlers, under ``jobqueue.*``, at their levels, from JOBQUEUE_LOG_LEVEL up."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import Iterator

import asyncpg
import pytest

APP = """
import asyncio, logging, sys
{setup}
from jobqueue import JobContext, JobQueue

jq = JobQueue()

@jq.task("hello")
async def hello(payload: dict, ctx: JobContext) -> None:
    ctx.log.info("said hello", to=payload["to"])

async def main() -> None:
    async with jq, jq.worker():
        job = await jq.enqueue("hello", {{"to": "world"}})
        assert (await jq.wait(job.id, timeout=30)).status == "completed"
    print("the application's own output")

asyncio.run(main())
"""
BASIC = (
    "logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,"
    " format='%(levelname)s %(name)s: %(message)s')"
)


@pytest.fixture
def fresh_env(env: dict[str, str], pg_dsn: str) -> Iterator[dict[str, str]]:
    """A schema of its own, not migrated yet: the worker migrates it, and says so."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield {**env, "JOBQUEUE_SCHEMA": schema}

    async def drop() -> None:
        conn = await asyncpg.connect(pg_dsn)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()

    asyncio.run(drop())


def run_app(env: dict[str, str], setup: str = "", **more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", APP.format(setup=setup)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**env, **more},
    )


def test_the_worker_and_its_migrations_write_nothing_on_stdout(fresh_env: dict[str, str]) -> None:
    done = run_app(fresh_env)
    assert done.stdout == "the application's own output\n"
    # No logging set up: Python's last resort prints warnings, and there were none but
    # that of a test server whose autovacuum is off, if it is.
    lines = done.stderr.splitlines()
    assert [line for line in lines if not line.startswith("autovacuum is off")] == []


def test_the_applications_handlers_get_the_lines_at_their_levels(
    fresh_env: dict[str, str],
) -> None:
    done = run_app(fresh_env, BASIC)
    assert done.stdout == "the application's own output\n"
    lines = done.stderr.splitlines()
    for start in (
        "INFO jobqueue.migrate: migration applied version=1 ",
        "INFO jobqueue.worker: worker started ",
        "INFO jobqueue.lifecycle: job.started job_id=1 type=hello ",
        "INFO jobqueue.job: said hello job_id=1 type=hello attempt=1 to=world",
        "INFO jobqueue.lifecycle: job.completed job_id=1 type=hello ",
    ):
        assert any(line.startswith(start) for line in lines), (start, done.stderr)
    assert not [line for line in lines if line.startswith("DEBUG jobqueue")]

    quieter = run_app(fresh_env, BASIC, JOBQUEUE_LOG_LEVEL="warning")
    assert quieter.stdout == "the application's own output\n"
    # But for the warning of a test server whose autovacuum is off, if it is.
    logged = [line for line in quieter.stderr.splitlines() if "jobqueue" in line]
    assert [line for line in logged if "autovacuum is off" not in line] == []
