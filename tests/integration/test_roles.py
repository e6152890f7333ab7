"""The enqueue-only role of `jobqueue grants --for enqueue`: an application connected as
it enqueues (one job, many, under a unique key, inside its own transaction, in a
savepoint) and reads back what it enqueued, but cannot read, change or delete any other
job, nor read any other table."""

from __future__ import annotations

import dataclasses
import uuid

import asyncpg
import psycopg
import pytest

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.db.grants import ENQUEUE_COLUMNS
from jobqueue.db.migrate import migrate
from jobqueue.db.sql import queries
from jobqueue.db.store import Store
from jobqueue.model.job import JobStatus
from jobqueue.workflows import step
from tests.conftest import MakeRole, dsn_as
from tests.integration.test_bloat import schema_before
from tests.integration.test_sql import add_finished_jobs, add_pending_jobs

pytestmark = pytest.mark.anyio


async def test_the_enqueue_role_enqueues_in_its_transactions_and_sees_no_stored_job(
    jq: JobQueue, settings: Settings, schema: str, make_role: MakeRole
) -> None:
    _, dsn = make_role("enqueue")
    others = await jq.enqueue("send_email", {"to": "secret@example.com"}, unique_key="owner")
    app = JobQueue(settings=dataclasses.replace(settings, database_url=dsn))
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            one = await app.enqueue("send_email", {"to": "a@example.com"}, conn=conn,
                                    tags=["role"], meta={"who": "enqueue"})  # fmt: skip
            many = await app.enqueue_many("noop", [{"n": 1}, {"n": 2}], conn=conn, tags=["role"])
            keyed = await app.enqueue("noop", {"n": 3}, unique_key="k", conn=conn)
            again = await app.enqueue("noop", {"n": 4}, unique_key="k", conn=conn)
            async with conn.transaction():  # a savepoint
                nested = await app.enqueue("noop", {"n": 5}, conn=conn)
            wf = app.workflow()
            wf.chain(step("noop", ref="first"), step("noop", ref="then"))
            workflow = await wf.enqueue(conn=conn)
            # What it enqueued came back whole; once stored, even its own rows are hidden.
            assert (one.type, one.payload, one.status) == (
                "send_email", {"to": "a@example.com"}, JobStatus.PENDING,
            )  # fmt: skip
            assert again.id == keyed.id
            assert await conn.fetchval(f'SELECT count(*) FROM "{schema}".jobs') == 0
        # A key held by a job it did not enqueue: enqueue answers with that job.
        holder = await app.enqueue("noop", unique_key="owner", conn=conn)
        assert (holder.id, holder.payload) == (others.id, {"to": "secret@example.com"})
        async with app:  # and without conn, on the app's own pool
            pooled = await app.enqueue("noop", {"n": 6})
            assert (await app.enqueue("noop", unique_key="k")).id == keyed.id

        stored = {job.id: job for job in await jq.list(limit=100)}
        enqueued = [one.id, *many, keyed.id, nested.id, pooled.id, *workflow.jobs.values()]
        assert set(stored) == {others.id, *enqueued}
        assert [stored[i].payload for i in many] == [{"n": 1}, {"n": 2}]
        # Its tagged jobs are found by the search, which reads the copies it inserted.
        assert {j.id for j in await jq.list(tag="role")} == {one.id, *many}

        assert await conn.fetch(f'SELECT * FROM "{schema}".jobs WHERE id = $1', others.id) == []
        for statement in (
            f"UPDATE \"{schema}\".jobs SET status = 'cancelled' WHERE id = {others.id}",
            f'DELETE FROM "{schema}".jobs WHERE id = {others.id}',
            f"UPDATE \"{schema}\".jobs SET payload = '{{}}' WHERE id = {one.id}",
            f'DELETE FROM "{schema}".jobs WHERE id = {one.id}',
            f'TRUNCATE "{schema}".jobs',
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(statement)
        tables = await conn.fetch(
            # workflows: readable for INSERT ... RETURNING id, as jobs are (ids, names, times).
            "SELECT tablename FROM pg_tables WHERE schemaname = $1"
            " AND tablename NOT IN ('jobs', 'workflows')",
            schema,
        )
        assert {"job_logs", "job_attempts", "unique_keys", "workers"} <= {
            t["tablename"] for t in tables
        }
        for table in tables:
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.fetch(f'SELECT * FROM "{schema}"."{table["tablename"]}" LIMIT 1')
        assert (await jq.get(others.id)) == others  # untouched
    finally:
        await conn.close()
        await app.close()


def test_the_enqueue_role_enqueues_on_a_sync_psycopg_connection(
    settings: Settings, schema: str, make_role: MakeRole
) -> None:
    """enqueue_sync(conn=...), the path of WSGI and Django applications, as the role."""
    _, dsn = make_role("enqueue")
    app = JobQueue(settings=dataclasses.replace(settings, database_url=dsn))
    with psycopg.connect(dsn) as conn:
        with conn.transaction():
            job = app.enqueue_sync("noop", {"n": 1}, conn=conn)
            again = app.enqueue_sync("noop", {"n": 2}, unique_key="k", conn=conn)
            assert app.enqueue_sync("noop", unique_key="k", conn=conn).id == again.id
        assert conn.execute(f'SELECT count(*) FROM "{schema}".jobs').fetchone() == (0,)
    assert (job.payload, again.payload) == ({"n": 1}, {"n": 2})
    app.close_sync()


async def test_the_worker_and_api_roles_see_every_job(
    jq: JobQueue, schema: str, make_role: MakeRole
) -> None:
    """Row-level security on jobs hides rows from the enqueue role only."""
    job = await jq.enqueue("noop")
    for purpose in ("worker", "api"):
        _, dsn = make_role(purpose)
        conn = await asyncpg.connect(dsn)
        try:
            assert await conn.fetchval(f'SELECT id FROM "{schema}".jobs') == job.id
        finally:
            await conn.close()


# The worker's statements that scan jobs by an index, with their arguments.
SCANS = {
    "claim": ("default", 10, "w", 30.0, None, None, None, None, ["noop"]),
    "rescue": (100, None),
    "retention_delete": (["completed"], 3600.0, 500, None),
    "priority_age": (300.0, 100, None),
}


async def test_the_worker_role_gets_the_owners_plans(
    db: asyncpg.Connection, schema: str, make_role: MakeRole
) -> None:
    """Row-level security costs the worker role nothing: its only policy is constant true,
    which the planner drops. (Any other policy would be evaluated before the conditions
    PostgreSQL cannot prove leakproof, such as `run_at <= COALESCE($5, now())`, which
    then stop being index conditions: a claim would fetch every scheduled job's row.)"""
    await add_finished_jobs(db, schema, 20000)
    await add_pending_jobs(db, schema, 2000)
    await db.execute(f'ANALYZE "{schema}".jobs')
    _, dsn = make_role("worker")
    worker = await asyncpg.connect(dsn)
    try:
        for name, args in SCANS.items():
            query = "EXPLAIN (COSTS OFF) " + getattr(queries(schema), name)
            owners = [r[0] for r in await db.fetch(query, *args)]
            workers = [r[0] for r in await worker.fetch(query, *args)]
            assert workers == owners, name
            assert "Index" in "\n".join(owners), (name, owners)
    finally:
        await worker.close()


async def test_an_enqueue_role_granted_before_tags_enqueues_with_them_after_the_upgrade(
    db: asyncpg.Connection, settings: Settings, pg_dsn: str
) -> None:
    """Migration 0030 gives the new columns and functions to whoever `jobqueue grants`
    gave the old ones, so an application's role keeps enqueueing across the upgrade."""
    name, role = f"t_{uuid.uuid4().hex[:12]}", f"jq_{uuid.uuid4().hex[:8]}"
    try:
        await schema_before(Store(db, name), 30)
        # What the grants of the release before gave an enqueue role.
        old_columns = ", ".join(c for c in ENQUEUE_COLUMNS if c not in ("tags", "meta"))
        await db.execute(
            f'CREATE ROLE "{role}" LOGIN; GRANT USAGE ON SCHEMA "{name}" TO "{role}";'
            f'GRANT INSERT ({old_columns}), SELECT ON "{name}".jobs TO "{role}";'
            f'GRANT EXECUTE ON FUNCTION "{name}".enqueue_unique(text, text, jsonb, integer, '
            f"integer, timestamptz, float8, text, float8, timestamptz, jsonb, text) "
            f'TO "{role}";'
            f'GRANT EXECUTE ON FUNCTION "{name}".enqueue_unique_replacing(text, text, jsonb, '
            f"integer, integer, timestamptz, float8, text, float8, timestamptz, jsonb, text, "
            f'boolean) TO "{role}";'
        )
        await migrate(db, name)

        app = JobQueue(
            settings=dataclasses.replace(
                settings, database_url=dsn_as(pg_dsn, role), schema=name, migrate=False
            )
        )
        async with app:
            tagged = await app.enqueue("noop", {}, tags=["import"], meta={"customer": "acme"})
            keyed = await app.enqueue("noop", {}, unique_key="k", tags=["a"])
            replaced = await app.enqueue(
                "noop", {"n": 2}, unique_key="k", on_conflict="replace", tags=["b"]
            )
        assert (tagged.tags, tagged.meta) == (["import"], {"customer": "acme"})
        assert (replaced.id, replaced.tags) == (keyed.id, ["b"])
    finally:
        await db.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        await db.execute(f'DROP OWNED BY "{role}"; DROP ROLE IF EXISTS "{role}"')
