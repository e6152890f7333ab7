"""Workflows from Python: shapes run in order and see their parents' results, failures
cancel or let run what waits, a retry resumes it, creation is atomic, retention takes
a workflow whole."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from jobqueue import ui
from jobqueue.app import JobQueue
from jobqueue.context import JobContext
from jobqueue.db.sql import queries
from jobqueue.maintenance.retention import Retention
from jobqueue.model.job import JobStatus
from jobqueue.workflows import WorkflowError, step
from tests.integration.conftest import StartWorker

pytestmark = pytest.mark.anyio


async def wait_all(jq: JobQueue, ids: dict[str, int]) -> dict[str, Any]:
    return {ref: await jq.wait(job_id, timeout=20) for ref, job_id in ids.items()}


async def states(jq: JobQueue, workflow_id: int) -> dict[str, str]:
    workflow = await jq.get_workflow(workflow_id)
    assert workflow is not None
    return {node.ref: str(node.job.status) for node in workflow.jobs}


async def test_a_diamond_runs_in_order_and_the_last_job_sees_both_results(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    ran: list[str] = []
    seen: dict[str, Any] = {}

    @jq.task("node")
    async def node(payload: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
        ran.append(payload["name"])
        seen[payload["name"]] = ctx.parent_results
        assert ctx.workflow_id is not None
        return {"from": payload["name"]}

    wf = jq.workflow("diamond")
    a = wf.add("node", {"name": "A"}, ref="a")
    b = wf.add("node", {"name": "B"}, ref="b", depends_on=[a])
    c = wf.add("node", {"name": "C"}, ref="c", depends_on=[a])
    wf.add("node", {"name": "D"}, ref="d", depends_on=[b, c])
    created = await wf.enqueue()
    assert list(created.jobs) == ["a", "b", "c", "d"]
    assert (await states(jq, created.id))["d"] == "blocked"

    await start_worker()
    done = await wait_all(jq, created.jobs)
    assert {ref: job.status for ref, job in done.items()} == dict.fromkeys(
        "abcd", JobStatus.COMPLETED
    )
    assert (ran[0], sorted(ran[1:3]), ran[3]) == ("A", ["B", "C"], "D")
    assert seen["D"] == {"b": {"from": "B"}, "c": {"from": "C"}}
    assert seen["B"] == {"a": {"from": "A"}}
    workflow = await jq.get_workflow(created.id)
    assert workflow is not None
    assert workflow.status == "completed"
    assert [n.depends_on for n in workflow.jobs] == [[], ["a"], ["a"], ["b", "c"]]
    assert done["d"].workflow_id == created.id


async def test_a_chain_passes_each_result_on(jq: JobQueue, start_worker: StartWorker) -> None:
    @jq.task("add")
    async def add(payload: dict[str, Any], ctx: JobContext) -> int:
        before = ctx.parent_result if ctx.parent_results else 0
        return int(before) + int(payload["n"])

    wf = jq.workflow()
    nodes = wf.chain(step("add", {"n": 1}), step("add", {"n": 2}), step("add", {"n": 3}))
    created = await wf.enqueue()
    await start_worker()
    last = await jq.wait(created.jobs[nodes[-1].ref], timeout=20)
    assert last.result == 6


async def test_a_chord_callback_receives_every_result(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("square")
    async def square(payload: dict[str, Any]) -> int:
        return int(payload["n"]) ** 2

    @jq.task("total")
    async def total(payload: dict[str, Any], ctx: JobContext) -> int:
        return sum(ctx.parent_results.values())

    wf = jq.workflow()
    callback = wf.chord([step("square", {"n": n}) for n in range(1, 6)], step("total"))
    created = await wf.enqueue()
    await start_worker()
    assert (await jq.wait(created.jobs[callback.ref], timeout=20)).result == 55


async def test_a_failing_parent_cancels_its_subtree_and_a_retry_resumes_it(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    broken = {"yes": True}

    @jq.task("flaky", max_attempts=1)
    async def flaky(payload: dict[str, Any]) -> None:
        if broken["yes"]:
            raise RuntimeError("down")

    @jq.task("after")
    async def after(payload: dict[str, Any]) -> None:
        return None

    wf = jq.workflow()
    a = wf.add("flaky", ref="a")
    b = wf.add("after", ref="b", depends_on=[a])
    wf.add("after", ref="c", depends_on=[b])
    wf.add("after", ref="other")  # not downstream of a
    created = await wf.enqueue()
    await start_worker()
    await jq.wait(created.jobs["c"], timeout=20)
    await jq.wait(created.jobs["other"], timeout=20)
    assert await states(jq, created.id) == {
        "a": "failed",
        "b": "cancelled",
        "c": "cancelled",
        "other": "completed",
    }
    c = await jq.get(created.jobs["c"])
    assert c is not None
    assert c.last_error == f"not run: job {created.jobs['a']} ended failed"
    workflow = await jq.get_workflow(created.id)
    assert workflow is not None
    assert workflow.status == "failed"

    broken["yes"] = False
    await jq.retry(created.jobs["a"])
    assert (await jq.wait(created.jobs["c"], timeout=20)).status == JobStatus.COMPLETED
    assert set((await states(jq, created.id)).values()) == {"completed"}


async def test_under_continue_the_subtree_of_a_failed_parent_runs(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("boom", max_attempts=1)
    async def boom(payload: dict[str, Any]) -> None:
        raise RuntimeError("boom")

    @jq.task("report")
    async def report(payload: dict[str, Any], ctx: JobContext) -> list[str]:
        return list(ctx.failed_parents)

    wf = jq.workflow(on_failure="continue")
    a = wf.add("boom", ref="a")
    b = wf.add("report", ref="b", depends_on=[a])
    wf.add("report", ref="c", depends_on=[b])
    created = await wf.enqueue()
    await start_worker()
    done = await wait_all(jq, created.jobs)
    assert [done[r].status for r in "abc"] == [
        JobStatus.FAILED,
        JobStatus.COMPLETED,
        JobStatus.COMPLETED,
    ]
    assert done["b"].result == ["a"]


async def test_batch_callbacks_run_as_their_names_say(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    @jq.task("member", max_attempts=1)
    async def member(payload: dict[str, Any]) -> None:
        if payload.get("fail"):
            raise RuntimeError("member failed")

    @jq.task("callback")
    async def callback(payload: dict[str, Any]) -> None:
        return None

    async def run(fail: bool) -> dict[str, JobStatus]:
        wf = jq.workflow()
        batch = wf.batch(
            [step("member"), step("member", {"fail": fail})],
            on_success=step("callback", ref="success"),
            on_failure=step("callback", ref="failure"),
            on_finish=step("callback", ref="finish"),
        )
        assert batch.on_success is not None
        created = await wf.enqueue()
        done = await wait_all(jq, created.jobs)
        return {ref: done[ref].status for ref in ("success", "failure", "finish")}

    await start_worker()
    assert await run(fail=False) == {
        "success": JobStatus.COMPLETED,
        "failure": JobStatus.CANCELLED,
        "finish": JobStatus.COMPLETED,
    }
    assert await run(fail=True) == {
        "success": JobStatus.CANCELLED,
        "failure": JobStatus.COMPLETED,
        "finish": JobStatus.COMPLETED,
    }


async def test_a_workflow_in_a_transaction_rolled_back_leaves_nothing(
    jq: JobQueue, db: asyncpg.Connection, schema: str, pg_dsn: str
) -> None:
    conn = await asyncpg.connect(pg_dsn)

    async def enqueue_then_fail() -> None:
        async with conn.transaction():
            wf = jq.workflow()
            wf.chain(step("a"), step("b"), step("c"))
            await wf.enqueue(conn=conn)
            raise RuntimeError("rolled back")

    try:
        with pytest.raises(RuntimeError, match="rolled back"):
            await enqueue_then_fail()
        async with conn.transaction():
            wf = jq.workflow()
            wf.chain(step("a"), step("b"))
            created = await wf.enqueue(conn=conn)
    finally:
        await conn.close()
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".jobs') == 2
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".workflows') == 1
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".workflow_edges') == 1
    assert await states(jq, created.id) == {"a-1": "pending", "b-2": "blocked"}


async def test_a_cycle_or_an_unknown_ref_stores_nothing(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    wf = jq.workflow()
    wf.add("a", ref="a", depends_on=["c"])
    wf.add("b", ref="b", depends_on=["a"])
    wf.add("c", ref="c", depends_on=["b"])
    with pytest.raises(WorkflowError, match=r"cycle: . -> . -> . -> .") as raised:
        await wf.enqueue()
    assert raised.value.field.startswith("jobs[")
    wf = jq.workflow()
    wf.add("a", ref="a", depends_on=["nope"])
    with pytest.raises(WorkflowError, match="unknown ref 'nope'") as raised:
        await wf.enqueue()
    assert raised.value.field == "jobs[0].depends_on"
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".jobs') == 0


@pytest.mark.parametrize(
    ("payload", "options", "error"),
    [
        ({"x": {"y": float("nan")}}, {}, "jobs[1]: payload.x.y: nan is not a JSON number"),
        ({}, {"delay_seconds": float("inf")},
         "jobs[1]: delay_seconds: must be a finite number from 0 to 315360000, got inf"),
    ],
)  # fmt: skip
async def test_a_number_json_does_not_have_stores_nothing(
    jq: JobQueue,
    db: asyncpg.Connection,
    schema: str,
    payload: dict[str, Any],
    options: dict[str, Any],
    error: str,
) -> None:
    wf = jq.workflow()
    wf.add("a", {"ok": 1}, ref="a")
    wf.add("b", payload, ref="b", depends_on=["a"], **options)
    with pytest.raises(WorkflowError) as raised:
        await wf.enqueue()
    assert str(raised.value) == error
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".jobs') == 0


async def test_unique_keys_priorities_and_queues_hold_for_workflow_jobs(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    wf = jq.workflow()
    a = wf.add("a", ref="a", unique_key="nightly", priority=-5, queue="etl")
    wf.add("b", ref="b", depends_on=[a], unique_key="nightly-load", max_attempts=7)
    created = await wf.enqueue()
    b = await jq.get(created.jobs["b"])
    assert b is not None
    assert (b.status, b.max_attempts, b.unique_key) == (
        JobStatus.BLOCKED,
        7,
        "nightly-load",
    )
    a_job = await jq.get(created.jobs["a"])
    assert a_job is not None
    assert (a_job.priority, a_job.queue) == (-5, "etl")
    # A blocked job holds its key as a pending one does.
    assert (await jq.enqueue("b", unique_key="nightly-load")).id == created.jobs["b"]
    again = jq.workflow()
    again.add("x", ref="x")
    again.add("a", ref="a2", unique_key="nightly")
    with pytest.raises(WorkflowError, match="held by job") as raised:
        await again.enqueue()
    assert raised.value.field == "jobs[1].unique_key"
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".workflows') == 1


async def test_cancelling_a_workflow_cancels_every_job_not_ended(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    wf = jq.workflow()
    wf.chain(step("never"), step("never"))
    created = await wf.enqueue()
    workflow = await jq.cancel_workflow(created.id)
    assert workflow is not None
    assert workflow.status == "cancelled"
    assert {str(n.job.status) for n in workflow.jobs} == {"cancelled"}
    assert await jq.cancel_workflow(created.id + 1000) is None


async def test_the_newest_workflows_are_listed_with_their_jobs_counted_by_state(
    jq: JobQueue,
) -> None:
    first = jq.workflow("first")
    first.chain(step("never"), step("never"))
    cancelled = await first.enqueue()
    await jq.cancel_workflow(cancelled.id)
    second = jq.workflow("second")
    second.chain(step("never"), step("never"), step("never"))
    chain = await second.enqueue()
    third = jq.workflow()
    third.add("never")
    single = await third.enqueue()

    listed = await jq.list_workflows(limit=2)
    assert [(w.id, w.name, w.status) for w in listed] == [
        (single.id, None, "running"),
        (chain.id, "second", "running"),
    ]
    states = ("blocked", "pending", "running", "completed", "failed", "cancelled", "waiting")
    none = dict.fromkeys(states, 0)
    assert listed[0].jobs == none | {"pending": 1}
    assert listed[1].jobs == none | {"pending": 1, "blocked": 2}
    oldest = (await jq.list_workflows())[-1]
    assert (oldest.id, oldest.status, oldest.jobs) == (
        cancelled.id,
        "cancelled",
        none | {"cancelled": 2},
    )


async def test_retention_deletes_a_finished_workflow_whole_never_half(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    wf = jq.workflow()
    wf.chain(step("a"), step("b"))
    created = await wf.enqueue()
    # The first job ended long ago, the second is still blocked: nothing goes.
    await db.execute(
        f"UPDATE \"{schema}\".jobs SET status = 'completed', finished_at = now() - interval "
        f"'2 days' WHERE id = $1",
        created.jobs["a-1"],
    )
    retention = Retention(await jq.store(), retain_completed=86400, retain_failed=None)
    await retention.run_once()
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".jobs') == 2
    await db.execute(
        f"UPDATE \"{schema}\".jobs SET status = 'completed', finished_at = now() - interval "
        f"'2 days', created_at = now() - interval '3 days'"
    )
    await db.execute(f"UPDATE \"{schema}\".workflows SET created_at = now() - interval '3 days'")
    await retention.run_once()
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".jobs') == 0
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".workflow_edges') == 0
    assert await jq.get_workflow(created.id) is None


async def test_the_dashboard_job_page_links_to_its_workflow_and_its_states(jq: JobQueue) -> None:
    wf = jq.workflow("nightly")
    wf.chain(step("extract", ref="extract"), step("load", ref="load"))
    created = await wf.enqueue()
    app = FastAPI()
    app.mount("/ui", ui.app(jq, open_without_tokens=True))
    transport = httpx.ASGITransport(app=app, client=("192.0.2.9", 5000))
    async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as browser:
        page = await browser.get(f"/ui/jobs/{created.jobs['load']}")
        assert page.status_code == 200
        assert f'href="/ui/workflows/{created.id}" id="workflow-link"' in page.text
        rows = re.findall(r'<tr data-job="(\d+)".*?badge (\w+)', page.text, re.S)
        assert rows == [
            (str(created.jobs["extract"]), "pending"),
            (str(created.jobs["load"]), "blocked"),
        ]
        whole = await browser.get(f"/ui/workflows/{created.id}")
        assert whole.status_code == 200
        assert "Workflow 1 · nightly" in whole.text
        assert (await browser.get("/ui/workflows/999")).status_code == 404


async def test_a_jobs_parents_and_a_workflows_jobs_are_read_through_indexes(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    wf = jq.workflow()
    parent = wf.add("a", ref="parent")
    wf.group(*(step("b") for _ in range(500)), depends_on=[parent])
    created = await wf.enqueue()
    other = jq.workflow()
    other.group(*(step("c") for _ in range(5000)), depends_on=[other.add("c", ref="root")])
    await other.enqueue()
    await jq.enqueue_many("other", [{}] * 20_000)
    await db.execute("ANALYZE")
    q = queries(schema)
    child = created.jobs["b-2"]
    parents = "\n".join(r[0] for r in await db.fetch("EXPLAIN " + q.workflow_parent_results, child))
    assert "workflow_edges_child_idx" in parents, parents
    assert "Seq Scan" not in parents, parents
    jobs = "\n".join(r[0] for r in await db.fetch("EXPLAIN " + q.workflow_jobs, created.id))
    assert "jobs_workflow_idx" in jobs, jobs
    assert "Seq Scan on jobs" not in jobs, jobs
    assert "SubPlan" not in jobs, jobs  # the edges joined once, not looked up per job


async def test_a_parent_retried_within_its_attempts_or_timed_out_for_good(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    attempts: list[int] = []

    @jq.task("once_flaky", max_attempts=2)
    async def once_flaky(payload: dict[str, Any], ctx: JobContext) -> str:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")
        return "second"

    @jq.task("slow", max_attempts=1, timeout=0.2)
    async def slow(payload: dict[str, Any]) -> None:
        await asyncio.sleep(30)

    @jq.task("then")
    async def then(payload: dict[str, Any], ctx: JobContext) -> Any:
        return ctx.parent_result

    wf = jq.workflow()
    wf.chain(step("once_flaky", ref="flaky"), step("then", ref="after_flaky"))
    wf.chain(step("slow", ref="slow"), step("then", ref="after_slow"))
    created = await wf.enqueue()
    await start_worker(retry_delay=0)
    done = await wait_all(jq, created.jobs)
    assert (done["after_flaky"].status, done["after_flaky"].result) == (
        JobStatus.COMPLETED,
        "second",
    )
    assert attempts == [1, 2]
    assert done["slow"].status == JobStatus.FAILED
    assert "timeout" in (done["slow"].last_error or "")
    assert done["after_slow"].status == JobStatus.CANCELLED


async def test_a_workflow_in_a_limited_queue_keeps_its_limit_and_its_results(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    """Released children wait for a slot of their queue's global limit like any job,
    and still read their parents' results."""
    running = 0
    most = 0

    @jq.task("slow", queue="mail")
    async def slow(payload: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.05)
        running -= 1
        return {"n": payload["n"], "seen": sorted(ctx.parent_results)}

    await jq.set_limits("mail", global_limit=2)
    wf = jq.workflow("limited")
    root = wf.add("slow", {"n": 0}, ref="root")
    fan = [wf.add("slow", {"n": i}, ref=f"c{i}", depends_on=[root]) for i in range(1, 7)]
    wf.add("slow", {"n": 7}, ref="last", depends_on=fan)
    created = await wf.enqueue()

    await start_worker(queues=("mail",), worker_count=10)
    done = await wait_all(jq, created.jobs)
    assert {job.status for job in done.values()} == {JobStatus.COMPLETED}
    assert most == 2
    assert done["c3"].result == {"n": 3, "seen": ["root"]}
    assert done["last"].result == {"n": 7, "seen": [f"c{i}" for i in range(1, 7)]}


async def test_workflow_jobs_keep_their_concurrency_keys(jq: JobQueue) -> None:
    wf = jq.workflow("keyed")
    a = wf.add("node", {}, ref="a", queue="mail", concurrency_key="acme")
    wf.add("node", {}, ref="b", queue="mail", depends_on=[a], concurrency_key="globex")
    wf.add("node", {}, ref="c", unique_key="wf-c", concurrency_key="initech")
    created = await wf.enqueue()
    keys = {}
    for ref, job_id in created.jobs.items():
        job = await jq.get(job_id)
        assert job is not None
        keys[ref] = job.concurrency_key
    assert keys == {"a": "acme", "b": "globex", "c": "initech"}
