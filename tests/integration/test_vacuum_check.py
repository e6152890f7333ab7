"""A worker that leads maintenance warns, once, when autovacuum cannot reach the
schema's tables: nothing else would reclaim the dead rows of claims, completions and
retention (docs/retention.md#vacuum)."""

from __future__ import annotations

import logging

import asyncpg
import pytest

from jobqueue.app import JobQueue
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio

OFF = "autovacuum is off"


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if OFF in r.getMessage()]


async def test_a_table_without_autovacuum_is_named_once(
    jq: JobQueue,
    db: asyncpg.Connection,
    schema: str,
    start_worker: StartWorker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server_on = await db.fetchval("SELECT current_setting('autovacuum')::bool")
    await db.execute(f'ALTER TABLE "{schema}".jobs SET (autovacuum_enabled = off)')
    with caplog.at_level(logging.WARNING, "jobqueue"):
        worker = await start_worker(rescue_interval=0.1)
        assert await worker.leader.signals.ran.times(3, timeout=15) == [True, True, True]
    [warned] = warnings(caplog)  # once, not once per round
    # A server with autovacuum off (some test machines) is named instead of the table.
    assert ("for jobs:" in warned) if server_on else ("on this server" in warned)
    assert "docs/retention.md#vacuum" in warned


async def test_a_server_that_vacuums_every_table_gets_no_warning(
    jq: JobQueue,
    db: asyncpg.Connection,
    start_worker: StartWorker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server_on = await db.fetchval(
        "SELECT current_setting('autovacuum')::bool AND current_setting('track_counts')::bool"
    )
    with caplog.at_level(logging.WARNING, "jobqueue"):
        worker = await start_worker(rescue_interval=0.1)
        assert await worker.leader.signals.ran.times(2, timeout=15) == [True, True]
    if server_on:
        assert warnings(caplog) == []
    else:
        [warned] = warnings(caplog)
        assert "on this server (autovacuum or track_counts)" in warned
