"""Returns the jobs of dead or frozen workers to the queue once their lease runs out."""

from __future__ import annotations

import asyncpg
import structlog

from jobqueue.db.sql import Queries

log = structlog.get_logger("jobqueue.rescuer")

BATCH = 1000
# Workers silent for this many leases are dropped from the workers table.
FORGET_AFTER_LEASES = 10


class Rescuer:
    def __init__(self, pool: asyncpg.Pool, queries: Queries, *, lease_seconds: float) -> None:
        self._pool = pool
        self._q = queries
        self._lease_seconds = lease_seconds

    async def run_once(self) -> int:
        """Rescue every expired job, in batches; return how many."""
        rescued = 0
        while True:
            rows = await self._pool.fetch(self._q.rescue, BATCH)
            for row in rows:
                then = {
                    "pending": "pending again",
                    "failed": "failed: no attempt left",
                    "cancelled": "cancelled, as asked",
                }[row["status"]]
                log.warning(
                    f"Job {row['id']} rescued: worker lost (lease expired) on attempt "
                    f"{row['attempts']}/{row['max_attempts']}; {then}",
                    job_id=row["id"],
                )
            rescued += len(rows)
            if len(rows) < BATCH:
                break
        await self._pool.fetch(self._q.workers_prune, self._lease_seconds * FORGET_AFTER_LEASES)
        return rescued
