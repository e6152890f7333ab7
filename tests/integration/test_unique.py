"""Unique jobs: one job per key while it is pending or running (and, if asked, for a
while after it completed), under concurrent enqueues; from Python and over HTTP (a real
server's and the CLI's: acceptance/)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import asyncpg
import httpx
import pytest

from jobqueue.app import JobQueue
from jobqueue.model.job import JobStatus
from tests.integration.conftest import StartWorker, add_ok_and_bad_tasks

pytestmark = pytest.mark.anyio


async def count(db: asyncpg.Connection, schema: str) -> int:
    n: int = await db.fetchval(f'SELECT count(*) FROM "{schema}".jobs')
    return n


async def test_a_key_holds_while_its_job_is_active_then_frees(
    jq: JobQueue, start_worker: StartWorker, db: asyncpg.Connection, schema: str
) -> None:
    started, gate = asyncio.Event(), asyncio.Event()

    @jq.task("report")
    async def report(payload: dict[str, Any]) -> None:
        started.set()
        await gate.wait()

    first = await jq.enqueue("report", {"day": 1}, unique_key="report:1")
    again = await jq.enqueue("report", {"day": 1}, unique_key="report:1")
    assert (again.id, again.status, again.unique_key) == (first.id, "pending", "report:1")
    await start_worker()
    await asyncio.wait_for(started.wait(), 10)
    assert (await jq.get(first.id)).status == JobStatus.RUNNING  # type: ignore[union-attr]
    assert (await jq.enqueue("report", unique_key="report:1")).id == first.id  # running
    gate.set()
    await jq.wait(first.id, timeout=15)
    after = await jq.enqueue("report", unique_key="report:1")  # completed: free again
    assert after.id != first.id
    assert await count(db, schema) == 2


async def test_unique_for_holds_the_key_after_completion_but_not_after_failure(
    jq: JobQueue, start_worker: StartWorker
) -> None:
    add_ok_and_bad_tasks(jq)
    done = await jq.enqueue("ok", unique_key="k1", unique_for=3600)
    failed = await jq.enqueue("bad", unique_key="k2", unique_for=3600)
    await start_worker()
    await jq.wait(done.id, timeout=15)
    await jq.wait(failed.id, timeout=15)
    assert (await jq.enqueue("ok", unique_key="k1")).id == done.id
    assert (await jq.enqueue("bad", unique_key="k2")).id != failed.id


async def test_every_key_of_jobs_ended_in_one_statement_is_released_and_a_retry_holds_again(
    jq: JobQueue, start_worker: StartWorker, db: asyncpg.Connection, schema: str
) -> None:
    """The keys' trigger does the work of a whole statement at its first row that ends
    (or revives) a job: cancel_many ends three in one UPDATE, and a retry brings one
    back; each key must follow its own job."""
    add_ok_and_bad_tasks(jq)
    jobs = [
        await jq.enqueue("ok", {"n": n}, unique_key=f"k{n}", unique_for=3600) for n in (1, 2, 3)
    ]
    assert (await jq.cancel_many(type="ok"))["cancelled"] == 3
    held = await db.fetch(
        f"SELECT key, held_until = 'infinity' AS held FROM \"{schema}\".unique_keys ORDER BY key"
    )
    assert [(r["key"], r["held"]) for r in held] == [("k1", False), ("k2", False), ("k3", False)]
    taken = await jq.enqueue("ok", {"n": 1}, unique_key="k1", unique_for=3600)
    assert taken.id not in {j.id for j in jobs}  # a cancelled job's key is free at once
    await jq.retry(jobs[2].id)  # pending again: its key, still its own, is held again
    assert (await jq.enqueue("ok", unique_key="k3", unique_for=3600)).id == jobs[2].id
    await start_worker()
    for job in (taken, jobs[2]):
        await jq.wait(job.id, timeout=15)
    # completed, with unique_for: held for an hour after, by the job that completed
    assert (await jq.enqueue("ok", unique_key="k1")).id == taken.id
    assert (await jq.enqueue("ok", unique_key="k3")).id == jobs[2].id
    assert (await jq.enqueue("ok", unique_key="k2")).id not in {j.id for j in jobs}


async def test_a_claim_calls_no_trigger_but_the_counters_and_an_end_calls_the_keys_once(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    """What a claim (pending to running) and a completion of plain and keyed jobs call,
    as EXPLAIN ANALYZE reports each trigger a statement called: a key's trigger has
    nothing to do while its job stays held, and does a statement's keys at once."""
    add_ok_and_bad_tasks(jq)
    ids = [(await jq.enqueue("ok")).id]
    ids += [(await jq.enqueue("ok", {"n": n}, unique_key=f"t{n}")).id for n in (1, 2, 3)]

    async def called(status: str) -> dict[str, int]:
        plan = await db.fetch(
            f'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) UPDATE "{schema}".jobs '
            "SET status = $1 WHERE id = ANY($2::bigint[])",
            status,
            ids,
        )
        found = (re.match(r"Trigger (\w+): calls=(\d+)", r[0]) for r in plan)
        return {m[1]: int(m[2]) for m in found if m}

    assert await called("running") == {"jobs_count_updated": 1}
    assert await called("completed") == {"jobs_count_updated": 1, "jobs_unique_keys": 1}
    freed = await db.fetchval(
        f"SELECT count(*) FROM \"{schema}\".unique_keys WHERE held_until <> 'infinity'"
    )
    assert freed == 3


async def test_concurrent_enqueues_store_one_job(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    jobs = await asyncio.gather(*(jq.enqueue("x", unique_key="same") for _ in range(50)))
    assert len({j.id for j in jobs}) == 1
    assert await count(db, schema) == 1


async def test_bad_unique_options_are_refused_naming_the_field(
    api_client: httpx.AsyncClient, jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    lonely = await api_client.post("/jobs", json={"type": "x", "unique_for": 5})
    assert lonely.status_code == 422
    assert "unique_for needs a unique_key" in lonely.json()["detail"][0]["msg"]
    batch = await api_client.post(
        "/jobs/batch", json={"jobs": [{"type": "x", "on_conflict": "replace"}]}
    )
    assert (batch.status_code, batch.json()["detail"][0]["field"]) == (422, "jobs.0")
    with pytest.raises(ValueError, match=r"^unique_for: needs a unique_key"):
        await jq.enqueue("x", unique_for=5)
    assert await count(db, schema) == 0


async def test_a_batch_takes_unique_keys_each_job_as_one_enqueue_would(
    api_client: httpx.AsyncClient, jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    holder = await jq.enqueue("x", {"v": 0}, unique_key="held")
    jobs = [
        {"type": "x", "payload": {"v": 1}, "unique_key": "new"},
        {"type": "x", "payload": {"v": 2}},
        {"type": "x", "payload": {"v": 3}, "unique_key": "new"},  # meets the first
        {"type": "x", "payload": {"v": 4}, "unique_key": "held", "on_conflict": "replace"},
    ]
    batch = await api_client.post("/jobs/batch", json={"jobs": jobs})
    assert batch.status_code == 201, batch.text
    ids = batch.json()["ids"]
    assert ids[0] == ids[2]
    assert ids[3] == holder.id
    assert len(set(ids)) == 3
    replaced = await jq.get(holder.id)
    assert replaced is not None
    assert replaced.payload == {"v": 4}
    assert await count(db, schema) == 3


async def test_enqueue_many_takes_a_unique_key_per_payload(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    holder = await jq.enqueue("x", {"v": 0}, unique_key="held")
    ids = await jq.enqueue_many(
        "x",
        [{"v": 1}, {"v": 2}, {"v": 3}, {"v": 4}],
        unique_keys=["new", None, "new", "held"],
        on_conflict="replace",
        tags=["import"],
    )
    assert ids[0] == ids[2]  # the third met the first, and replaced its payload
    assert ids[3] == holder.id
    assert len(set(ids)) == 3
    assert await count(db, schema) == 3
    jobs = {job_id: await jq.get(job_id) for job_id in set(ids)}
    assert {i: (j.payload, j.tags) for i, j in jobs.items() if j is not None} == {
        ids[0]: ({"v": 3}, ["import"]),
        ids[1]: ({"v": 2}, ["import"]),
        holder.id: ({"v": 4}, ["import"]),  # a holder replaced takes the tags given
    }


async def test_enqueue_many_refuses_bad_unique_keys_storing_nothing(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    with pytest.raises(ValueError, match=r"^unique_keys: 1 keys for 2 payloads$"):
        await jq.enqueue_many("x", [{}, {}], unique_keys=["a"])
    with pytest.raises(ValueError, match=r"^unique_keys\[1\]: unique_key: must be a string"):
        await jq.enqueue_many("x", [{}, {}], unique_keys=["a", ""])
    with pytest.raises(ValueError, match=r"^unique_keys\[0\]: on_conflict: debounce needs"):
        await jq.enqueue_many("x", [{}], unique_keys=["a"], on_conflict="debounce")
    with pytest.raises(ValueError, match=r"^unique_for: needs unique_keys$"):
        await jq.enqueue_many("x", [{}], unique_for=5)
    with pytest.raises(ValueError, match=r"^unique_keys: must be a list"):
        await jq.enqueue_many("x", [{}], unique_keys="a")  # type: ignore[typeddict-item]
    with pytest.raises(TypeError, match=r"unique_keys=\[\.\.\.\] gives each payload"):
        await jq.enqueue_many("x", [{}], unique_key="a")  # type: ignore[call-arg]
    assert await count(db, schema) == 0
