"""How a statement that ends workflow jobs releases their children (migration 0023): once
per statement whatever it ends, plain jobs beside them, several statements in one
transaction, parents ending differently in one batch, cascades, and jobs that had
ended already. The jobs are changed by UPDATE statements as the worker's would change
them, so that each case is one statement of known content."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.context import JobContext
from jobqueue.db.records import ClaimedJob
from jobqueue.model.job import JobStatus
from jobqueue.workflows import step
from tests.integration.conftest import Notifications, StartWorker

pytestmark = pytest.mark.anyio


async def rows(db: asyncpg.Connection, schema: str, workflow_id: int) -> dict[str, Any]:
    """Per ref: (status, parents_left, parents_failed)."""
    found = await db.fetch(
        f'SELECT workflow_ref, status, parents_left, parents_failed FROM "{schema}".jobs '
        "WHERE workflow_id = $1",
        workflow_id,
    )
    return {r[0]: (r[1], r[2], r[3]) for r in found}


async def end(db: asyncpg.Connection, schema: str, ends: dict[int, str]) -> str:
    """End the jobs ``ends`` names, each as its status, in one UPDATE; its plan, run."""
    plan = await db.fetch(
        f'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) UPDATE "{schema}".jobs AS j '
        "SET status = e.status, finished_at = now() "
        "FROM unnest($1::bigint[], $2::text[]) AS e(id, status) WHERE j.id = e.id",
        list(ends),
        list(ends.values()),
    )
    return "\n".join(r[0] for r in plan)


async def test_one_statement_ending_plain_and_workflow_jobs_releases_each_child_once(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    wf = jq.workflow()
    a = wf.add("a", ref="a")
    wf.add("b", ref="b", depends_on=[a])
    p = wf.add("p", ref="p")
    children = wf.group(step("c", ref="c1"), step("c", ref="c2"), depends_on=[p])
    wf.add("cb", ref="cb", depends_on=children)
    created = await wf.enqueue()
    plain = await jq.enqueue_many("plain", [{}] * 3)

    # The completion as the worker writes it: one statement for all five.
    store = await jq.store()
    claimed = await store.claim(queue="default", limit=10, worker_id="w", lease_seconds=60)
    assert len(claimed) == 5
    refused = await store.complete(jobs=claimed, worker_id="w", status=JobStatus.COMPLETED)
    assert refused == []
    assert await rows(db, schema, created.id) == {
        "a": ("completed", 0, 0),
        "b": ("pending", 0, 0),
        "p": ("completed", 0, 0),
        "c1": ("pending", 0, 0),
        "c2": ("pending", 0, 0),
        "cb": ("blocked", 2, 0),
    }

    # Both members of the chord and more plain jobs in one statement: one call of the
    # trigger's function, which counts the callback down by both at once.
    more = await jq.enqueue_many("plain", [{}] * 2)
    ends = dict.fromkeys([*more, created.jobs["c1"], created.jobs["c2"]], "completed")
    plan = await end(db, schema, ends)
    assert "Trigger jobs_workflow_step: calls=1" in plan, plan
    assert (await rows(db, schema, created.id))["cb"] == ("pending", 0, 0)

    # A statement on plain jobs alone never calls it.
    plan = await end(db, schema, dict.fromkeys(plain, "completed"))
    assert "jobs_workflow_step" not in plan, plan


async def test_each_statement_of_a_transaction_releases_its_own_children(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    wf = jq.workflow()
    for name in ("x", "y", "z", "w"):
        wf.chain(step("s", ref=f"{name}1"), step("s", ref=f"{name}2"))
    created = await wf.enqueue()
    jobs = created.jobs
    table = f'"{schema}".jobs'
    async with db.transaction():
        await db.execute(f"UPDATE {table} SET status = 'completed' WHERE id = $1", jobs["x1"])
        await db.execute(f"UPDATE {table} SET status = 'completed' WHERE id = $1", jobs["y1"])
        # Two statements of one function call: the same statement_timestamp, each its own
        # command.
        await db.execute(
            f"""DO $$ BEGIN
                UPDATE {table} SET status = 'completed' WHERE id = {jobs["z1"]};
                UPDATE {table} SET status = 'completed' WHERE id = {jobs["w1"]};
            END $$"""
        )
        inside = await rows(db, schema, created.id)
    after = await rows(db, schema, created.id)
    for state in (inside, after):
        assert {ref: s[0] for ref, s in state.items() if ref.endswith("2")} == {
            "x2": "pending",
            "y2": "pending",
            "z2": "pending",
            "w2": "pending",
        }


async def test_a_batch_of_parents_ending_differently_counts_each_child_once(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    """Three parents end in one statement, completed, failed and continuing, failed and
    cancelling; each child counts what its run_if says, children that count alike or not
    are released together, and one still waiting for a fourth parent stays blocked."""
    wf = jq.workflow()
    p1 = wf.add("p", ref="p1")
    p2 = wf.add("p", ref="p2", on_failure="continue")
    p3 = wf.add("p", ref="p3", on_failure="cancel")
    p4 = wf.add("p", ref="p4")
    wf.add("c", ref="all_finished", depends_on=[p1, p2, p3], run_if="finished")
    wf.add("c", ref="p1_p2", depends_on=[p1, p2])
    wf.add("c", ref="p1_only", depends_on=[p1])
    wf.add("c", ref="p3_only", depends_on=[p3])
    wf.add("c", ref="p3_failed", depends_on=[p3], run_if="failed")
    wf.add("c", ref="p1_failed", depends_on=[p1], run_if="failed")
    wf.add("c", ref="p1_p4", depends_on=[p1, p4])
    created = await wf.enqueue()
    jobs = created.jobs
    await end(db, schema, {jobs["p1"]: "completed", jobs["p2"]: "failed", jobs["p3"]: "failed"})
    state = await rows(db, schema, created.id)
    assert {ref: state[ref] for ref in state if not ref.startswith("p") or "_" in ref} == {
        "all_finished": ("pending", 0, 2),
        "p1_p2": ("pending", 0, 1),
        "p1_only": ("pending", 0, 0),
        "p3_only": ("cancelled", 1, 0),  # by the cascade: p3 cancels what it dooms
        "p3_failed": ("pending", 0, 1),
        "p1_failed": ("cancelled", 0, 0),  # every parent completed: it never runs
        "p1_p4": ("blocked", 1, 0),
    }
    cancelled = await jq.get(jobs["p3_only"])
    assert cancelled is not None
    assert cancelled.last_error == f"not run: job {jobs['p3']} ended failed"
    await end(db, schema, {jobs["p4"]: "completed"})
    assert (await rows(db, schema, created.id))["p1_p4"] == ("pending", 0, 0)


async def test_a_cascade_is_counted_by_the_jobs_that_run_whatever_below_it(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    """The cancellations of a cascade are a statement of their own, one level down; the
    jobs waiting on the cancelled ones with run_if finished count them, at any depth."""
    wf = jq.workflow()
    root = wf.add("r", ref="root")
    chain = wf.chain(*(step("s", ref=f"s{i}") for i in range(1, 5)), depends_on=[root])
    wf.add("f", ref="after_s2", depends_on=[chain[1]], run_if="finished")
    wf.add("f", ref="after_s4", depends_on=[chain[3]], run_if="finished")
    wf.add("f", ref="after_both", depends_on=[chain[0], chain[3]], run_if="finished")
    created = await wf.enqueue()
    await end(db, schema, {created.jobs["root"]: "failed"})
    state = await rows(db, schema, created.id)
    assert {ref: state[ref][0] for ref in state} == {
        "root": "failed",
        "s1": "cancelled",
        "s2": "cancelled",
        "s3": "cancelled",
        "s4": "cancelled",
        "after_s2": "pending",
        "after_s4": "pending",
        "after_both": "pending",
    }
    assert state["after_both"] == ("pending", 0, 2)
    for ref in ("s1", "s4"):
        job = await jq.get(created.jobs[ref])
        assert job is not None
        assert job.last_error == f"not run: job {created.jobs['root']} ended failed"


async def test_jobs_that_had_ended_are_not_counted_again(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    wf = jq.workflow()
    a = wf.add("a", ref="a", on_failure="continue")
    b = wf.add("b", ref="b")
    wf.add("c", ref="c", depends_on=[a, b])
    created = await wf.enqueue()
    jobs = created.jobs
    await end(db, schema, {jobs["a"]: "failed"})
    assert (await rows(db, schema, created.id))["c"] == ("blocked", 1, 1)
    # Rewritten by hand, from one end to another, alone and beside a job ending now.
    await end(db, schema, {jobs["a"]: "cancelled"})
    await end(db, schema, {jobs["a"]: "completed"})
    assert (await rows(db, schema, created.id))["c"] == ("blocked", 1, 1)
    await end(db, schema, {jobs["a"]: "failed", jobs["b"]: "completed"})
    assert (await rows(db, schema, created.id))["c"] == ("pending", 0, 1)


# The worker that completes a job claims the children it releases (complete_handoff.sql).

WORKER = "w"


async def claim_all(jq: JobQueue, queue: str = "default") -> list[ClaimedJob]:
    store = await jq.store()
    return await store.claim(queue=queue, limit=100, worker_id=WORKER, lease_seconds=60)


async def complete_handing(
    jq: JobQueue, jobs: list[ClaimedJob], *, limit: int = 10, queues: tuple[str, ...] = ("default",)
) -> list[ClaimedJob]:
    store = await jq.store()
    refused, handed = await store.complete_handoff(
        jobs=jobs, worker_id=WORKER, results=None, queues=queues, limit=limit, lease_seconds=60
    )
    assert refused == []
    return handed


async def test_a_completion_claims_the_children_it_releases_for_its_worker(
    jq: JobQueue, db: asyncpg.Connection, schema: str, notified: Notifications
) -> None:
    wf = jq.workflow()
    wf.chain(step("s", ref="a"), step("s", ref="b"), step("s", ref="c"))
    created = await wf.enqueue()
    assert await notified.so_far() == ["default"]
    [a] = await claim_all(jq)
    [b] = await complete_handing(jq, [a])
    assert (b.id, b.attempt, b.workflow_id) == (created.jobs["b"], 1, created.id)
    assert b.claim is not None
    row = await db.fetchrow(
        f"SELECT status, worker_id, parents_left, claim_token, lease_expires_at > now() AS held "
        f'FROM "{schema}".jobs WHERE id = $1',
        b.id,
    )
    assert tuple(row) == ("running", WORKER, 0, b.claim, True)
    assert (await rows(db, schema, created.id))["c"] == ("blocked", 1, 0)
    [c] = await complete_handing(jq, [b])
    assert c.id == created.jobs["c"]
    assert await complete_handing(jq, [c]) == []
    # Nothing was made pending, so nothing was announced: no other worker woke for them.
    assert await notified.so_far() == []
    assert {s[0] for s in (await rows(db, schema, created.id)).values()} == {"completed"}


async def test_children_a_claim_would_not_take_now_are_released_as_always(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    wf = jq.workflow()
    parent = wf.add("p", ref="parent")
    wf.add("c", ref="other_queue", depends_on=[parent], queue="elsewhere")
    wf.add("c", ref="paused", depends_on=[parent], queue="paused")
    wf.add("c", ref="limited", depends_on=[parent], queue="limited")
    wf.add("c", ref="behind", depends_on=[parent], queue="busy", priority=3)
    wf.add("c", ref="later", depends_on=[parent], delay_seconds=600)
    wf.add("c", ref="if_failed", depends_on=[parent], run_if="failed")
    wf.add("c", ref="two_parents", depends_on=[parent, wf.add("p", ref="running")])
    created = await wf.enqueue()
    await jq.pause("paused")
    await jq.set_limits("limited", global_limit=5)
    await jq.enqueue("waiting", queue="busy", priority=3)  # as good: it comes first
    claimed = {job.id: job for job in await claim_all(jq)}
    parent_job = claimed[created.jobs["parent"]]
    queues = ("default", "paused", "limited", "busy")
    assert await complete_handing(jq, [parent_job], queues=queues) == []
    state = {ref: s[0] for ref, s in (await rows(db, schema, created.id)).items()}
    assert state == {
        "parent": "completed",
        "running": "running",
        "other_queue": "pending",
        "paused": "pending",
        "limited": "pending",
        "behind": "pending",
        "later": "pending",
        "if_failed": "cancelled",
        "two_parents": "blocked",
    }


async def test_children_are_claimed_only_when_they_all_fit_in_the_slots_lent(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    """More children than free slots are left to the claims, which take the best first."""
    for limit, states in ((2, {"pending"}), (3, {"running"})):
        wf = jq.workflow()
        parent = wf.add("p", ref="parent")
        for priority in (5, 1, 3):
            wf.add("c", ref=f"p{priority}", depends_on=[parent], priority=priority)
        created = await wf.enqueue()
        [parent_job] = await claim_all(jq)
        handed = await complete_handing(jq, [parent_job], limit=limit)
        assert len(handed) == (3 if states == {"running"} else 0)
        state = await rows(db, schema, created.id)
        assert {state[f"p{p}"][0] for p in (5, 1, 3)} == states
        await db.execute(f"UPDATE \"{schema}\".jobs SET status = 'cancelled'")


async def test_a_worker_runs_a_chain_claiming_each_next_job_itself(
    jq: JobQueue, start_worker: StartWorker, notified: Notifications
) -> None:
    @jq.task("add")
    async def add(payload: dict[str, Any], ctx: JobContext) -> int:
        before = ctx.parent_result if ctx.parent_results else 0
        return int(before) + int(payload["n"])

    wf = jq.workflow()
    nodes = wf.chain(*(step("add", {"n": n}) for n in range(1, 7)))
    created = await wf.enqueue()
    await start_worker(worker_count=2)
    last = await jq.wait(created.jobs[nodes[-1].ref], timeout=20)
    assert last.result == 21
    # Only the first job was announced: each next one was claimed by the completion
    # that released it.
    assert await notified.so_far() == ["default"]


async def test_children_claimed_by_a_completion_keep_to_the_workers_slots(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    running = 0
    most = 0

    @jq.task("slow")
    async def slow(payload: dict[str, Any]) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.02)
        running -= 1

    wf = jq.workflow()
    parent = wf.add("slow", ref="parent")
    children = wf.group(*(step("slow") for _ in range(12)), depends_on=[parent])
    wf.add("slow", ref="callback", depends_on=children)
    created = await wf.enqueue()
    await start_worker(worker_count=3)
    done = await jq.wait(created.jobs["callback"], timeout=20)
    assert done.status == JobStatus.COMPLETED
    assert most == 3


async def test_slots_lent_for_released_children_are_kept_from_claims(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    worker = await start_worker(worker_count=3, queues=("mail=2", "default"))
    producer = worker.producer
    lent = producer.lend()
    assert lent is not None
    # Every free slot, for the queues without a limit of this worker's own.
    assert (lent.slots, lent.queues) == (3, ("default",))
    assert producer.lend() is None  # nothing left for a claim either
    producer.handed(lent, [])
    again = producer.lend()
    assert again is not None
    assert again.slots == 3
    producer.handed(again, [])
