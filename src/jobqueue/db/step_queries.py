"""The store's queries of durable steps and checkpoints (jobqueue.durable, docs/durable.md)."""

from __future__ import annotations

from jobqueue.db.query_base import QueryBase
from jobqueue.model.steps import Step


class StepQueries(QueryBase):
    async def job_steps(self, *, job_id: int) -> list[Step]:
        """The steps the job's handler recorded, in the order they were recorded."""
        return [Step.from_record(r) for r in await self.db.fetch(self._q.job_steps, job_id)]

    async def step_record(
        self, *, job_id: int, name: str, result: str | None, worker_id: str, claim: int | None
    ) -> bool:
        """Record a step's result (JSON text), fenced by the claim; False when the
        attempt no longer holds the job (nothing recorded). A step recorded already
        keeps its first result."""
        row = await self.db.fetchrow(self._q.step_record, job_id, name, result, worker_id, claim)
        held: bool = row["held"]
        return held

    async def checkpoint_save(
        self, *, job_id: int, value: str | None, worker_id: str, claim: int | None
    ) -> bool:
        """Save the job's cursor (JSON text, None to forget it), fenced by the claim;
        False when the attempt no longer holds the job (nothing saved)."""
        saved = await self.db.fetchval(self._q.checkpoint_save, job_id, value, worker_id, claim)
        return saved is not None
