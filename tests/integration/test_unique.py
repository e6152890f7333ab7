"""Unique jobs: one job per key while it is pending or running (and, if asked, for a
while after it completed), under concurrent enqueues; from Python and over HTTP (a real
server's and the CLI's: acceptance/)."""

from __future__ import annotations

import asyncio
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
