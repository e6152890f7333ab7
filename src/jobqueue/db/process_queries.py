"""The store's queries of the processes: the workers table, the leader's work, and what
workers over HTTP ask after a refused outcome. Part of the Store (db/store.py), which
inherits it."""

from __future__ import annotations

from collections.abc import Sequence

from jobqueue.db.query_base import QueryBase, _count, _held_pairs
from jobqueue.db.records import (
    LastOutcome,
    Rescued,
)
from jobqueue.model.job import WorkerInfo


class ProcessQueries(QueryBase):
    # -- the workers table -------------------------------------------------------------

    async def worker_register(
        self,
        *,
        worker_id: str,
        host: str,
        pid: int,
        queues: Sequence[str],
        slots: int,
        types: Sequence[str],
        any_type: bool,
    ) -> None:
        """Announce a worker: the queues it serves, the job types it has handlers for,
        and whether it claims jobs of every type (migration 0024)."""
        await self.db.execute(
            self._q.worker_register, worker_id, host, pid, list(queues), slots, self.clock.now(),
            list(types), any_type,
        )  # fmt: skip

    async def worker_heartbeat(self, *, worker_id: str) -> bool:
        """Renew the worker's row; False if it has none (forgotten: register again)."""
        renewed = await self.db.fetchval(self._q.worker_heartbeat, worker_id, self.clock.now())
        return renewed is not None

    async def worker_unregister(self, *, worker_id: str) -> None:
        await self.db.execute(self._q.worker_unregister, worker_id)

    async def workers_list(self) -> list[WorkerInfo]:
        return [WorkerInfo(**dict(r.items())) for r in await self.db.fetch(self._q.workers_list)]

    async def workers_prune(self, *, silent_seconds: float) -> list[str]:
        """Forget workers silent for ``silent_seconds``; return their ids."""
        rows = await self.db.fetch(self._q.workers_prune, silent_seconds, self.clock.now())
        return [row["id"] for row in rows]

    async def workers_types(self, *, within_seconds: float, queue: str) -> list[str]:
        """The job types that workers serving ``queue`` and heartbeating within the last
        ``within_seconds`` have handlers for, in order."""
        rows = await self.db.fetch(self._q.workers_types, within_seconds, queue, self.clock.now())
        return [row[0] for row in rows]

    async def workers_alive(self, *, within_seconds: float) -> int:
        """How many workers heartbeated within the last ``within_seconds``."""
        alive: int = await self.db.fetchval(self._q.workers_alive, within_seconds, self.clock.now())
        return alive

    # -- the leader's work ----------------------------------------------------------------

    async def leader_elect(self, *, role: str, leader_id: str, term_seconds: float) -> bool:
        """Take or renew the lead of ``role`` for ``term_seconds``; True if we hold it."""
        leader = await self.db.fetchval(
            self._q.leader_elect, role, leader_id, term_seconds, self.clock.now()
        )
        return leader is not None

    async def leader_holder(self, *, role: str) -> str | None:
        """The id of the process that holds the lead of ``role`` now, if any."""
        holder: str | None = await self.db.fetchval(self._q.leader_holder, role, self.clock.now())
        return holder

    async def leader_resign(self, *, role: str, leader_id: str) -> None:
        await self.db.execute(self._q.leader_resign, role, leader_id)

    async def leader_due(self) -> tuple[float | None, float | None]:
        """Seconds until the earliest schedule's tick and until the earliest waiting
        job's time (0 or less: due; None: none), in one probe."""
        row = await self.db.fetchrow(self._q.leader_due, self.clock.now())
        return row["schedule_in"], row["wake_in"]

    async def vacuum_reach(self) -> tuple[bool, list[str]]:
        """Whether the server runs autovacuum, and the schema's tables that turn it off
        for themselves."""
        row = await self.db.fetchrow(self._q.vacuum_reach)
        return row["server_on"], list(row["tables_off"])

    async def rescue(self, *, limit: int) -> list[Rescued]:
        """Return up to ``limit`` jobs whose lease expired to the queue (or end them)."""
        rows = await self.db.fetch(self._q.rescue, limit, self.clock.now())
        return [
            Rescued(r["id"], r["status"], r["attempts"], r["max_attempts"], r["queue"], r["type"])
            for r in rows
        ]

    async def priority_age(self, *, step_seconds: float, limit: int) -> int:
        """Move up to ``limit`` waiting jobs up a priority step; return how many."""
        aged: int = await self.db.fetchval(
            self._q.priority_age, step_seconds, limit, self.clock.now()
        )
        return aged

    async def retention_delete(
        self, *, statuses: Sequence[str], older_than_seconds: float, limit: int
    ) -> int:
        """Delete up to ``limit`` jobs finished in ``statuses`` longer ago than
        ``older_than_seconds``; return how many."""
        status = await self.db.execute(
            self._q.retention_delete, list(statuses), older_than_seconds, limit, self.clock.now()
        )
        return _count(status)

    async def unique_keys_expire(self, *, limit: int) -> int:
        """Delete up to ``limit`` unique keys whose hold has ended; return how many."""
        return _count(await self.db.execute(self._q.unique_keys_expire, limit, self.clock.now()))

    async def idempotency_keys_expire(self, *, limit: int) -> int:
        """Delete up to ``limit`` idempotency keys past their expiry; return how many."""
        return _count(
            await self.db.execute(self._q.idempotency_keys_expire, limit, self.clock.now())
        )

    # -- workers over HTTP --------------------------------------------------------------

    async def complete_leased(
        self, *, held: Sequence[tuple[int, int]], worker_id: str, results: str | None
    ) -> dict[int, str]:
        """End the jobs ``held`` (each its id and its claim's token), each completed with
        its result (``results``: ``{"<id>": result, ...}`` as JSON text, or None), or
        cancelled if it was asked to stop. Returns the status of each job ended; a job
        not in it was refused by the fence."""
        rows = await self.db.fetch(
            self._q.complete_leased, [job_id for job_id, _ in held], _held_pairs(held), worker_id,
            results, self.clock.now(),
        )  # fmt: skip
        return {row["id"]: row["status"] for row in rows}

    async def outcome_applied(self, *, job_id: int) -> LastOutcome | None:
        """The job as a refused outcome asks after it; None if it is gone."""
        r = await self.db.fetchrow(self._q.outcome_applied, job_id)
        return None if r is None else LastOutcome(**dict(r.items()))
