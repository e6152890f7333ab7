"""Unique keys' conflict modes: ``replace`` and ``debounce`` change a pending holder in
place (same id), never a running one (a new job is stored behind it and takes the
key), and a burst of concurrent enqueues leaves one pending job with the last payload."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import asyncpg
import pytest

from jobqueue.app import JobQueue
from jobqueue.model.job import JobStatus

pytestmark = pytest.mark.anyio


async def pending(db: asyncpg.Connection, schema: str, key: str) -> list[asyncpg.Record]:
    rows: list[asyncpg.Record] = await db.fetch(
        f"SELECT id, payload FROM \"{schema}\".jobs WHERE unique_key = $1 AND status = 'pending'",
        key,
    )
    return rows


async def test_replace_changes_a_pending_holder_and_debounce_pushes_it_back(
    jq: JobQueue,
) -> None:
    first = await jq.enqueue("sync", {"v": 1}, unique_key="acct-7", delay_seconds=60)
    replaced = await jq.enqueue(
        "sync", {"v": 2}, unique_key="acct-7", on_conflict="replace", priority=-3
    )
    assert (replaced.id, replaced.payload, replaced.priority) == (first.id, {"v": 2}, -3)
    assert replaced.run_at < first.run_at  # due now: no delay given this time
    debounced = await jq.enqueue(
        "sync", {"v": 3}, unique_key="acct-7", on_conflict="debounce", delay_seconds=30
    )
    assert (debounced.id, debounced.payload, debounced.priority) == (first.id, {"v": 3}, -3)
    assert debounced.run_at - debounced.updated_at > timedelta(seconds=29)
    # The default still answers with the holder, unchanged.
    held = await jq.enqueue("sync", {"v": 4}, unique_key="acct-7")
    assert (held.id, held.payload) == (first.id, {"v": 3})
    for bad, words in [
        ({"on_conflict": "merge", "unique_key": "k"}, "on_conflict: must be one of"),
        ({"on_conflict": "replace"}, "on_conflict: needs a unique_key"),
        ({"on_conflict": "debounce", "unique_key": "k"}, "debounce needs delay_seconds"),
    ]:
        with pytest.raises(ValueError, match=words):
            await jq.enqueue("sync", {}, **bad)  # type: ignore[arg-type]


async def test_a_running_holder_is_never_changed_a_new_job_waits_behind_it(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    holder = await jq.enqueue("sync", {"v": 1}, unique_key="acct-8")
    await db.execute(f"UPDATE \"{schema}\".jobs SET status = 'running' WHERE id = $1", holder.id)
    behind = await jq.enqueue("sync", {"v": 2}, unique_key="acct-8", on_conflict="replace")
    assert behind.id != holder.id
    assert behind.status == JobStatus.PENDING
    running = await jq.get(holder.id)
    assert running is not None
    assert (running.status, running.payload) == (JobStatus.RUNNING, {"v": 1})
    # The key is the new job's now: the next debounce changes it, not the running one.
    again = await jq.enqueue(
        "sync", {"v": 3}, unique_key="acct-8", on_conflict="debounce", delay_seconds=5
    )
    assert (again.id, again.payload) == (behind.id, {"v": 3})


async def test_a_burst_of_concurrent_debounces_leaves_one_job_with_the_last_payload(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    jq.settings = dataclasses.replace(jq.settings, pool_size=20)
    for mode in ("debounce", "replace"):
        key = f"burst-{mode}"
        options = {"delay_seconds": 5} if mode == "debounce" else {}
        answers = await asyncio.gather(
            *(
                jq.enqueue("sync", {"n": n}, unique_key=key, on_conflict=mode, **options)
                for n in range(50)
            )
        )
        [row] = await pending(db, schema, key)
        assert {a.id for a in answers} == {row["id"]}
        # Each change took the key's row in turn; the last to change it is the latest.
        last = max(answers, key=lambda a: a.updated_at)
        assert row["payload"] == f'{{"n": {last.payload["n"]}}}'
