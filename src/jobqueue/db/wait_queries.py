"""The store's queries of what durable jobs wait for (jobqueue.durable, docs/durable.md):
children spawned at run time and signals from outside."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from jobqueue.db.query_base import QueryBase
from jobqueue.model.json_text import loads
from jobqueue.model.steps import Child, Children, Step


@dataclasses.dataclass(frozen=True, slots=True)
class JobWaits:
    """What GET /jobs/{id} shows of a durable job besides its row."""

    steps: list[Step]  # in the order they were recorded
    awaiting: str | None
    spawned_by: int | None
    has_children: bool


@dataclasses.dataclass(frozen=True, slots=True)
class ChildWait:
    """What ctx.wait_for found: the children not ended yet, the first whose failure
    cancels the parent, how many of the ids named are not its children, the parent's
    status if the call changed it ('waiting', 'cancelled'), and whether the attempt
    still holds the job."""

    running: int
    failed: int | None
    strangers: int
    status: str | None
    held: bool


@dataclasses.dataclass(frozen=True, slots=True)
class ChildEnd:
    """A child as ctx.wait_for returns it: its state, result and last error."""

    id: int
    status: str
    result: Any
    error: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class SignalWait:
    """What ctx.wait_for_signal found: the signal (found, its payload), or the job's
    status if the call made it wait ('waiting', or 'cancelled' if asked to stop)."""

    found: bool
    payload: Any
    status: str | None


class WaitQueries(QueryBase):
    async def spawn_adopt(
        self, *, job_id: int, children: Sequence[int], on_failure: str, worker_id: str,
        claim: int | None,
    ) -> bool:  # fmt: skip
        """Make ``children`` the job's, fenced by its claim; False (nothing changed) when
        the attempt no longer holds it."""
        held: bool = await self.db.fetchval(
            self._q.spawn_adopt, job_id, on_failure, list(children), worker_id, claim
        )
        return held

    async def children_wait(
        self, *, job_id: int, children: Sequence[int], worker_id: str, claim: int | None
    ) -> ChildWait:
        """Wait for the job's children, fenced by its claim (children_wait.sql)."""
        r = await self.db.fetchrow(
            self._q.children_wait, job_id, list(children), worker_id, claim, self.clock.now()
        )
        return ChildWait(r["running"], r["failed"], r["strangers"], r["status"], r["held"])

    async def children_results(self, *, job_id: int, children: Sequence[int]) -> list[ChildEnd]:
        """The job's ``children``, each as it ended (in no particular order)."""
        rows = await self.db.fetch(self._q.children_results, job_id, list(children))
        return [
            ChildEnd(r["id"], r["status"], _decoded(r["result"]), r["last_error"]) for r in rows
        ]

    async def job_children(self, *, job_id: int, limit: int) -> Children:
        """The job's first ``limit`` children, and how many it has and have ended."""
        rows = await self.db.fetch(self._q.job_children, job_id, limit)
        if not rows:
            return Children(0, 0, [])
        first = rows[0]
        return Children(
            first["total"], first["ended"], [Child(r["id"], r["type"], r["status"]) for r in rows]
        )

    async def job_detail(self, *, job_id: int) -> JobWaits | None:
        """The job's recorded steps, what it waits for (its ``awaiting``), the job that
        spawned it and whether it has spawned children, read at once; None: no such job."""
        rows = await self.db.fetch(self._q.job_detail, job_id)
        if not rows:
            return None
        first = rows[0]
        steps = [] if first["name"] is None else [Step.from_record(r) for r in rows]
        return JobWaits(
            steps, first["awaiting"], first["spawned_by"], first["children_left"] is not None
        )

    async def signal_send(
        self, *, job_id: int, name: str, payload: str | None
    ) -> tuple[int | None, str | None]:
        """Keep a signal for the job, waking it if it waits for one; the signal's id (None:
        not kept, the job has ended) and the job's status (None: no such job)."""
        r = await self.db.fetchrow(self._q.signal_send, job_id, name, payload, self.clock.now())
        return r["signal_id"], r["status"]

    async def signal_hold(self, *, job_id: int, worker_id: str, claim: int | None) -> bool:
        """Lock the job's row to the transaction's end, fenced by its claim (False: the
        attempt no longer holds it): what signal_wait is run after."""
        held = await self.db.fetchval(self._q.signal_hold, job_id, worker_id, claim)
        return held is not None

    async def signal_wait(self, *, job_id: int, name: str, nth: int, until: Any) -> SignalWait:
        """The run's ``nth`` wait for the signal ``name``: the signal, or the job made to
        wait for it (until ``until``, a datetime or None). Run after signal_hold, in its
        transaction."""
        r = await self.db.fetchrow(self._q.signal_wait, job_id, name, nth, until, self.clock.now())
        return SignalWait(r["found"], _decoded(r["payload"]), r["status"])


def _decoded(text: str | None) -> Any:
    """A jsonb column's value from its text (every Executor gives it as text)."""
    return None if text is None else loads(text)
