"""Tags, metadata and search (docs/search.md) from Python: what is stored and shown, the
filters, the payload filter's bound and its cursor, and the indexes the search uses."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from typing import Any

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.context import JobContext
from jobqueue.db.migrate import migrate
from jobqueue.db.store import Store
from jobqueue.enqueue.new_job import NewJob
from jobqueue.model import search
from jobqueue.model.search import JobFilter
from tests.integration.conftest import StartWorker
from tests.integration.test_bloat import schema_before

pytestmark = pytest.mark.anyio


async def test_tags_and_meta_are_stored_on_every_path_and_shown(jq: JobQueue) -> None:
    one = await jq.enqueue("t", {"n": 1}, tags=["import", "import", "nightly"],
                           meta={"customer": "acme", "user_id": 42})  # fmt: skip
    assert (one.tags, one.meta) == (["import", "nightly"], {"customer": "acme", "user_id": 42})
    plain = await jq.enqueue("t", {"n": 2})
    assert (plain.tags, plain.meta) == ([], {})
    many = await jq.enqueue_many("t", [{"n": 3}, {"n": 4}], tags=["bulk"], meta={"batch": 7})
    for job_id in many:
        job = await jq.get(job_id)
        assert job is not None
        assert (job.tags, job.meta) == (["bulk"], {"batch": 7})
    # A unique holder replaced takes the new tags; one not given keeps its metadata.
    held = await jq.enqueue("t", {"n": 5}, unique_key="k", tags=["a"], meta={"m": 1})
    again = await jq.enqueue("t", {"n": 6}, unique_key="k", on_conflict="replace", tags=["b"])
    assert (again.id, again.tags, again.meta, again.payload) == (held.id, ["b"], {"m": 1}, {"n": 6})

    changed = await jq.update_job(plain.id, tags=["later"], meta={"who": "ops"})
    assert (changed.tags, changed.meta) == (["later"], {"who": "ops"})
    cleared = await jq.update_job(plain.id, tags=[], meta={})
    assert (cleared.tags, cleared.meta) == ([], {})


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"tags": ["x"] * 17}, "tags"),
        ({"tags": ["y" * 65]}, "tags"),
        ({"tags": "import"}, "tags"),
        ({"tags": [""]}, "tags"),
        ({"meta": {"big": "z" * 9000}}, "meta"),
        ({"meta": ["not", "an", "object"]}, "meta"),
        ({"meta": {"n": float("nan")}}, "meta"),
    ],
)
async def test_bad_tags_and_meta_are_refused_naming_the_field(
    jq: JobQueue, options: dict[str, object], field: str
) -> None:
    with pytest.raises(ValueError, match=rf"^{field}"):
        await jq.enqueue("t", {}, **options)  # type: ignore[arg-type]
    assert await jq.list() == []


async def test_filters_combine_and_read_values_as_json(jq: JobQueue) -> None:
    a = await jq.enqueue("t", {"user": {"id": 42}}, tags=["import", "eu"],
                         meta={"customer": "acme", "user_id": 42})  # fmt: skip
    b = await jq.enqueue("t", {"user": {"id": "42"}}, tags=["import"],
                         meta={"customer": "acme", "user_id": "42"})  # fmt: skip
    c = await jq.enqueue("u", {"user": {"id": 7}}, meta={"customer": "globex"})

    async def ids(**filters: object) -> list[int]:
        return [j.id for j in await jq.list(**filters)]  # type: ignore[arg-type]

    assert await ids(tag="import") == [b.id, a.id]
    assert await ids(tag=["import", "eu"]) == [a.id]
    assert await ids(meta={"customer": "acme"}) == [b.id, a.id]
    assert await ids(meta=search.containment([("user_id", "42")], "meta")) == [a.id]
    assert await ids(meta=search.containment([("user_id", '"42"')], "meta")) == [b.id]
    assert await ids(payload=search.containment([("user.id", "7")], "payload")) == [c.id]
    assert await ids(tag="import", type="u") == []
    assert await ids(meta={"customer": "globex"}, type="u") == [c.id]


def test_search_terms_are_read_as_the_docs_say() -> None:
    terms = search.parse_terms('tag:import,eu customer="acme corp" meta.n=1 payload.user.id=42')
    assert terms.tags == ["import", "eu"]
    assert terms.meta == {"customer": "acme corp", "n": 1}
    assert terms.payload == {"user": {"id": 42}}
    for bad, message in [("customer", "not a term"), ("a=1 a=2", "given twice"),
                         ("a.b=1 a=2", "given twice"), ("tag:" + "x" * 65, "tag:"),
                         ('q="open', "search")]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            search.parse_terms(bad)
    assert search.value_of("NaN") == "NaN"
    assert search.value_of("007") == "007"
    assert search.value_of("true") is True
    assert search.value_of("null") is None


async def test_a_payload_filter_stops_at_its_bound_and_its_cursor_reads_on(
    jq: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "PAYLOAD_SCAN_ROWS", 5)
    wanted = await jq.enqueue("t", {"k": "x"})
    others = await jq.enqueue_many("t", [{"k": "y"}] * 6)
    newest = await jq.enqueue("t", {"k": "x"})
    where = JobFilter(payload={"k": "x"})

    first = await jq.inspect.jobs(where, limit=10)
    assert [j.id for j in first.jobs] == [newest.id]
    assert first.truncated
    # The sixth job read is where the next search starts, whatever its payload.
    assert first.next_after == others[1] + 1
    second = await jq.inspect.jobs(where, after=first.next_after, limit=10)
    assert ([j.id for j in second.jobs], second.truncated, second.next_after) == (
        [wanted.id], False, None
    )  # fmt: skip
    # Without a payload filter there is no bound; a full page says a next one exists.
    page = await jq.inspect.jobs(JobFilter(), limit=7)
    assert (len(page.jobs), page.truncated, page.next_after) == (7, False, page.jobs[-1].id)
    rest = await jq.inspect.jobs(JobFilter(), after=page.next_after, limit=7)
    assert ([j.id for j in rest.jobs], rest.next_after) == ([wanted.id], None)


async def test_tag_and_meta_filters_use_their_indexes(jq: JobQueue, db: asyncpg.Connection) -> None:
    schema = jq.settings.schema
    await db.execute(
        f"""WITH job AS (
                INSERT INTO "{schema}".jobs (type, queue, payload, tags, meta)
                SELECT 't', 'default', '{{}}',
                       CASE WHEN g % 10 = 0 THEN ARRAY['common'] WHEN g = 7 THEN ARRAY['rare-7']
                            ELSE ARRAY['batch-' || g % 500] END,
                       jsonb_build_object('customer', 'c' || g)
                FROM generate_series(1, 50000) AS g
                RETURNING id, tags, meta
            )  -- the search's copy, as the enqueue statements write it
            INSERT INTO "{schema}".job_labels SELECT id, tags, meta FROM job"""
    )
    await db.execute(f'ANALYZE "{schema}".jobs, "{schema}".job_labels')
    store = await jq.store()

    async def plan(where: JobFilter) -> str:
        """The plan of the page Inspector.jobs reads for ``where``, chosen as it chooses."""
        async with store.transaction() as tx:
            await tx.plan_per_execution()
            few = await tx.job_labels_count(where=where, at_most=search.FEW_LABELLED)
            rows = await tx.db.fetch(
                "EXPLAIN " + tx._q.jobs_search, None, None, None, None, None, None, 50, None,
                None, _list(where.tags), search_json(where.meta), 50, None,
                few < search.FEW_LABELLED,
            )  # fmt: skip
        return "\n".join(r[0] for r in rows)

    # Few jobs carry it, or none: their ids from the index, then those jobs by id. Read
    # newest first instead, the planner expecting half the rarest known tag's count,
    # a tag no job carries read all 50,000.
    for tags in (["rare-7"], ["absent"]):
        rare = await plan(JobFilter(tags=tags))
        assert "job_labels_idx" in rare, rare
        assert "Index Cond: (id = ANY (" in rare, rare  # the jobs by their ids
        assert "Seq Scan" not in rare, rare
    meta = await plan(JobFilter(meta={"customer": "c7"}))
    assert "job_labels_idx" in meta, meta
    assert "Seq Scan" not in meta, meta
    # One job in ten carries it: newest first along the primary key, a page and no more
    # (read from the index, all 5,000 would be fetched and sorted).
    common = await plan(JobFilter(tags=["common"]))
    assert "jobs_pkey" in common, common
    assert "job_labels_idx" not in common, common
    assert "= ANY" not in common, common
    assert "Sort" not in common, common
    found = await jq.list(tag="rare-7")
    assert [j.tags for j in found] == [["rare-7"]]
    assert len(await jq.list(tag="common", limit=200)) == 200


async def test_the_searched_copy_follows_every_change(jq: JobQueue, db: asyncpg.Connection) -> None:
    """job_labels, what the search reads (migration 0031), follows the job's own tags
    and metadata through an edit, a replacing enqueue, a delete and a truncate."""
    schema = jq.settings.schema

    async def copy() -> dict[int, tuple[list[str] | None, str | None]]:
        rows = await db.fetch(f'SELECT job_id, tags, meta FROM "{schema}".job_labels')
        return {r["job_id"]: (r["tags"], r["meta"]) for r in rows}

    plain = await jq.enqueue("t", {})
    tagged = await jq.enqueue("t", {}, tags=["a"], unique_key="k")
    assert await copy() == {tagged.id: (["a"], None)}
    await jq.update_job(plain.id, meta={"customer": "acme"})
    await jq.enqueue("t", {}, unique_key="k", on_conflict="replace", tags=["b"])
    assert await copy() == {plain.id: (None, '{"customer": "acme"}'), tagged.id: (["b"], None)}
    assert [j.id for j in await jq.list(meta={"customer": "acme"})] == [plain.id]
    assert [j.id for j in await jq.list(tag="b")] == [tagged.id]
    await jq.update_job(plain.id, meta={})
    await jq.delete_job(tagged.id)
    assert await copy() == {}
    assert await jq.list(tag="b") == []
    await jq.enqueue("t", {}, tags=["c"])
    await db.execute(f'TRUNCATE "{schema}".jobs CASCADE')
    assert await copy() == {}


def _list(values: object) -> list[str] | None:
    return None if values is None else list(values)  # type: ignore[call-overload]


def search_json(value: object) -> str | None:
    return None if value is None else json.dumps(value)


async def test_every_statement_that_inserts_a_job_writes_its_searched_copy(
    jq: JobQueue, db: asyncpg.Connection
) -> None:
    """No trigger writes job_labels on insert (migration 0031): each statement that
    inserts jobs does. A path that forgot would leave its jobs out of a search for a tag
    few jobs carry, which reads job_labels alone."""
    schema = jq.settings.schema
    t = {"tags": ["copied"], "meta": {"path": "x"}}
    await jq.enqueue("t", {}, **t)  # enqueue.sql
    await asyncio.gather(*(jq.enqueue("t", {"n": i}, **t) for i in range(5)))  # enqueue_rows.sql
    await jq.enqueue("t", {}, tags=["copied"], meta=None)  # tags without metadata
    await jq.enqueue("t", {}, meta={"path": "meta only"})  # and the other way
    await jq.enqueue_many("t", [{}, {}], **t)  # enqueue_payloads.sql
    await jq.enqueue("t", {}, unique_key="u1", **t)  # enqueue_unique.sql
    await jq.enqueue("t", {}, unique_key="u2", on_conflict="replace", **t)  # ..._replacing.sql
    await jq.enqueue_jobs([NewJob(type="t", **t), NewJob(type="t")])  # POST /jobs/batch
    wf = jq.workflow("copied")
    wf.add("t", ref="a", **t)
    wf.add("t", ref="b", depends_on=["a"], tags=["copied", "child"])
    await wf.enqueue()  # workflow_insert_jobs.sql
    await jq.schedules.create("copied", "t", every="1h", **t)
    await jq.schedules.trigger("copied")  # a schedule's tick
    async with db.transaction():  # an application's own transaction
        await jq.enqueue("t", {}, conn=db, **t)

    mismatched = await db.fetch(
        f"""SELECT j.id, j.tags, j.meta, l.tags AS copied_tags, l.meta AS copied_meta
            FROM "{schema}".jobs AS j
            FULL JOIN "{schema}".job_labels AS l ON l.job_id = j.id
            WHERE (j.tags IS NOT NULL OR j.meta IS NOT NULL) IS DISTINCT FROM (l.job_id IS NOT NULL)
               OR l.tags IS DISTINCT FROM j.tags OR l.meta IS DISTINCT FROM j.meta"""
    )
    assert mismatched == []
    copies = await db.fetchval(f'SELECT count(*) FROM "{schema}".job_labels')
    assert copies == 17  # every job above but the batch's untagged one
    found = await jq.list(tag="copied", limit=100)  # few carry it: read from job_labels
    assert len(found) == 16  # all but the one with metadata alone


async def test_a_handler_sees_its_jobs_tags_and_meta(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    seen: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {}

    @jq.task("look", queue="plain")
    async def look(payload: dict[str, Any], ctx: JobContext) -> None:
        seen[payload["name"]] = (ctx.tags, dict(ctx.meta))

    await jq.set_limits("limited", global_limit=5)  # claimed by claim_limited.sql
    jobs = [
        (await jq.enqueue("look", {"name": "tagged"}, tags=["a"], meta={"customer": "acme"})).id,
        (await jq.enqueue("look", {"name": "plain"})).id,
        (await jq.enqueue("look", {"name": "limited"}, queue="limited", tags=["slow"])).id,
    ]
    wf = jq.workflow("w")  # the child is handed over by its parent's completion
    parent = wf.add("look", {"name": "parent"}, ref="p")
    wf.add("look", {"name": "child"}, ref="c", depends_on=[parent], meta={"step": 2})
    jobs += (await wf.enqueue()).jobs.values()
    await start_worker(queues=("plain", "limited"))
    for job_id in jobs:
        await jq.wait(job_id, timeout=30)
    assert seen == {
        "tagged": (("a",), {"customer": "acme"}),
        "plain": ((), {}),
        "limited": (("slow",), {}),
        "parent": ((), {}),
        "child": ((), {"step": 2}),
    }


async def test_jobs_tagged_before_the_labels_table_are_found_after_the_upgrade(
    db: asyncpg.Connection, settings: Settings
) -> None:
    """Migration 0031 copies the tags and metadata that jobs carried under 0030."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    try:
        await schema_before(Store(db, name), 31)
        await db.execute(
            f"""INSERT INTO "{name}".jobs (type, tags, meta)
                VALUES ('t', '{{import}}', NULL), ('t', NULL, '{{"customer": "acme"}}'),
                       ('t', NULL, NULL)"""
        )
        await migrate(db, name)
        app = JobQueue(settings=dataclasses.replace(settings, schema=name, migrate=False))
        async with app:
            assert [j.tags for j in await app.list(tag="import")] == [["import"]]
            assert [j.meta for j in await app.list(meta={"customer": "acme"})] == [
                {"customer": "acme"}
            ]
    finally:
        await db.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
