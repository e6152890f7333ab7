"""What a schema behind the code shows and does (docs/migrations.md): `jobqueue migrate
--status` and `--dry-run`, and a process started without migrating refusing it."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.db.migrate import code_version, dry_run, migrate, status
from jobqueue.db.store import Store
from jobqueue.server import StartupError, check_schema
from tests.integration.test_bloat import schema_before

pytestmark = pytest.mark.anyio


@pytest.fixture
async def old_schema(db: asyncpg.Connection) -> AsyncIterator[str]:
    """A schema as the release before migration 30 left it, with a job in it."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    await schema_before(Store(db, name), 30)
    await db.execute(f"INSERT INTO \"{name}\".jobs (type) VALUES ('t')")
    yield name
    await db.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


async def test_the_status_lists_applied_and_pending_migrations(
    db: asyncpg.Connection, old_schema: str
) -> None:
    found = await status(db, old_schema)
    assert (found.version, found.applied[-1][1]) == (29, "unique_conflict_modes")
    assert [m.version for m in found.pending] == list(range(30, code_version() + 1))
    nothing = await status(db, f"t_{uuid.uuid4().hex[:12]}")  # no schema at all
    assert (nothing.version, nothing.applied, len(nothing.pending)) == (0, [], code_version())


async def test_a_dry_run_shows_each_migrations_locks_and_changes_nothing(
    db: asyncpg.Connection, old_schema: str
) -> None:
    planned = dict((m.version, steps) for m, steps in await dry_run(db, old_schema))
    assert list(planned) == list(range(30, code_version() + 1))
    # Migration 30's first statement adds columns to jobs: a lock that stops enqueues and
    # claims until the migration's transaction commits. 31 creates its own table:
    # nobody waits on that.
    statement, locks = planned[30][0]
    assert statement.startswith(f'ALTER TABLE "{old_schema}".jobs ADD COLUMN tags text[]')
    assert f"AccessExclusiveLock on {old_schema}.jobs (blocks reads and writes)" in locks
    assert not any("job_labels" in lock for _, locks in planned[31] for lock in locks)
    assert (await status(db, old_schema)).version == 29
    columns = await db.fetchval(
        "SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 "
        "AND table_name = 'jobs' AND column_name = 'tags'",
        old_schema,
    )
    assert columns == 0
    assert await db.fetchval(f'SELECT count(*) FROM "{old_schema}".jobs') == 1


async def test_a_start_without_migrating_refuses_an_older_schema(
    db: asyncpg.Connection, old_schema: str, settings: Settings
) -> None:
    app = JobQueue(settings=dataclasses.replace(settings, schema=old_schema, migrate=False))
    async with app:
        with pytest.raises(StartupError) as refused:
            await check_schema(app)
        assert str(refused.value) == (
            f"the database's schema {old_schema!r} is at migration 29 and this jobqueue "
            f"needs {code_version()}: run `jobqueue migrate`"
        )
        await migrate(db, old_schema)
        await check_schema(app)  # up to date: starts


async def test_every_migration_applies_statement_by_statement(db: asyncpg.Connection) -> None:
    """The dry run applies each statement alone: the statements are split where the
    script's semicolons end them, not inside a function's body or a string."""
    empty = f"t_{uuid.uuid4().hex[:12]}"
    planned = await dry_run(db, empty)
    assert [m.version for m, _ in planned] == list(range(1, code_version() + 1))
    assert (await status(db, empty)).version == 0  # rolled back


def test_the_cli_prints_the_status_and_the_dry_run(settings: Settings) -> None:
    env = {"DATABASE_URL": settings.database_url or "", "JOBQUEUE_SCHEMA": settings.schema}
    for flag, last in (("--status", f"needs {code_version()}"), ("--dry-run", "schema up to date")):
        done = subprocess.run(
            [sys.executable, "-m", "jobqueue", "migrate", flag],
            env={**_inherited(), **env},
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().splitlines()[-1].endswith(last), done.stdout


def _inherited() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("JOBQUEUE_", "DATABASE_"))}
