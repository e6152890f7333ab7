"""The store's queries of durable jobs (jobqueue.durable, docs/durable.md): steps,
checkpoints and sleeps."""

from __future__ import annotations

import json
from collections.abc import Sequence

from jobqueue.db.query_base import QueryBase, _fenced_out
from jobqueue.db.records import ClaimedJob, Sleep
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

    async def sleep(self, *, sleeps: Sequence[Sleep], worker_id: str) -> list[ClaimedJob]:
        """Record durable sleeps: each job waiting until its time, the attempt uncounted
        (cancelled instead if asked to stop). Returns the jobs the fence refused."""
        jobs = [s.job for s in sleeps]
        held = {str(s.job.id): {"claim": s.job.claim, "until": s.until.isoformat()} for s in sleeps}
        rows = await self.db.fetch(
            self._q.sleep, [j.id for j in jobs], json.dumps(held), worker_id, self.clock.now()
        )
        return _fenced_out(jobs, rows)

    async def wake(self, *, limit: int) -> int:
        """Make up to ``limit`` waiting jobs whose time has come pending; return how many."""
        woken: int = await self.db.fetchval(self._q.wake, limit, self.clock.now())
        return woken
