"""The claim of a queue with limits: two statements in one transaction, so that the
counting one sees every claim that held the queue's row before it (limit_lock.sql
says why one statement cannot)."""

from __future__ import annotations

from collections.abc import Sequence

from jobqueue.db.records import ClaimedJob
from jobqueue.db.store import Store


async def claim(
    store: Store,
    *,
    queue: str,
    limit: int,
    worker_id: str,
    lease_seconds: float,
    types: Sequence[str] | None = None,
) -> list[ClaimedJob]:
    """Up to ``limit`` due jobs of ``queue``, as many as its limits let start now, of
    ``types`` (None: of every type). ``store`` runs on one connection."""
    async with store.begin():
        await store.limit_lock(queue=queue)
        return await store.claim_limited(
            queue=queue,
            limit=limit,
            worker_id=worker_id,
            lease_seconds=lease_seconds,
            types=types,
        )
