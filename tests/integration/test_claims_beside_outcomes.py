"""A claim that carries outcomes is made beside them, on its own connection
(api/work_routes.py): what it claimed must not be lost when the outcomes fail, and
the outcomes and the claim answer as they did one after the other."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg
import pytest

from jobqueue.api.work_routes import claimed
from jobqueue.api.work_schemas import ClaimRequest
from jobqueue.app import JobQueue
from jobqueue.model.tokens import OPEN

pytestmark = pytest.mark.anyio


async def never_gone() -> bool:
    return False


async def claim(jq: JobQueue, **order: Any) -> dict[str, Any]:
    request = ClaimRequest.model_validate({"worker": "w1", "queues": ["images"], **order})
    return await claimed(jq, OPEN, request, "127.0.0.1", never_gone)


async def states(db: asyncpg.Connection, schema: str, ids: Sequence[int]) -> list[tuple[str, int]]:
    rows = await db.fetch(
        f'SELECT status, attempts FROM "{schema}".jobs WHERE id = ANY($1) ORDER BY id', ids
    )
    return [(r["status"], r["attempts"]) for r in rows]


async def test_the_jobs_of_a_claim_whose_outcomes_fail_are_handed_back(
    jq: JobQueue, db: asyncpg.Connection, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [(await jq.enqueue("resize", queue="images")).id for _ in range(3)]
    first = await claim(jq, max=1)
    lease = first["jobs"][0]["lease"]

    async def unreachable(items: Sequence[object]) -> None:
        raise ConnectionResetError("the database went away")

    monkeypatch.setattr(jq.http_workers, "outcomes", unreachable)
    with pytest.raises(ConnectionResetError):
        await claim(jq, max=2, outcomes=[{"lease": lease, "result": 1}])
    # The claim made beside the failed outcomes took the other two; its answer was never
    # sent, so they are pending again at once, their attempt not counted.
    assert await states(db, schema, ids) == [("running", 1), ("pending", 0), ("pending", 0)]


async def test_outcomes_and_the_claim_beside_them_are_both_answered(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    ids = [(await jq.enqueue("resize", queue="images")).id for _ in range(4)]
    first = await claim(jq, max=2)
    done = [{"lease": j["lease"], "result": {"n": j["id"]}} for j in first["jobs"]]
    second = await claim(jq, max=2, outcomes=done)
    assert [(o["id"], o["ok"], o["status"]) for o in second["outcomes"]] == [
        (ids[0], True, "completed"), (ids[1], True, "completed")
    ]  # fmt: skip
    assert [j["id"] for j in second["jobs"]] == ids[2:]
    assert await states(db, schema, ids) == [
        ("completed", 1), ("completed", 1), ("running", 1), ("running", 1)
    ]  # fmt: skip


async def test_outcomes_that_fail_are_answered_with_their_own_error_if_no_hand_back_can_be_made(
    jq: JobQueue, db: asyncpg.Connection, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [(await jq.enqueue("resize", queue="images")).id for _ in range(3)]
    lease = (await claim(jq, max=1))["jobs"][0]["lease"]

    async def unreachable(*args: object, **kwargs: object) -> None:
        raise ConnectionResetError("the database went away")

    async def refused(*args: object, **kwargs: object) -> None:
        raise ConnectionRefusedError("the database is still away")

    monkeypatch.setattr(jq.http_workers, "outcomes", unreachable)
    monkeypatch.setattr(await jq.store(), "release", refused)
    with pytest.raises(ConnectionResetError):
        await claim(jq, max=2, outcomes=[{"lease": lease, "result": 1}])
    # Not handed back: held until their leases lapse, when they are rescued.
    assert await states(db, schema, ids) == [("running", 1), ("running", 1), ("running", 1)]
