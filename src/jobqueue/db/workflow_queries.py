"""The store's queries of workflows (jobqueue.workflows). Part of the Store
(db/store.py), which inherits it."""

from __future__ import annotations

import json
from collections.abc import Sequence

from jobqueue.db.query_base import QueryBase, _columns, _count, _tags_and_meta
from jobqueue.db.records import (
    Cancelled,
    JobRow,
    NodeState,
    ParentResult,
    WorkflowCounts,
    WorkflowRow,
)
from jobqueue.model.job import Job


class WorkflowQueries(QueryBase):
    # -- workflows (jobqueue.workflows) -------------------------------------------------

    async def workflow_create(self, *, name: str | None) -> int:
        workflow_id: int = await self.db.fetchval(self._q.workflow_create, name)
        return workflow_id

    async def workflow_insert_jobs(
        self, *, workflow_id: int, rows: Sequence[JobRow], nodes: Sequence[NodeState]
    ) -> list[int]:
        """A workflow's jobs without unique keys, in one statement; their ids in order."""
        columns = _columns(rows)
        records = await self.db.fetch(
            self._q.workflow_insert_jobs, *columns, self.clock.now(), [r.trace for r in rows],
            workflow_id, [n.ref for n in nodes], [n.status for n in nodes],
            [n.parents for n in nodes], [n.on_failure for n in nodes], [n.run_if for n in nodes],
            [r.concurrency_key for r in rows], *_tags_and_meta(rows),
        )  # fmt: skip
        return [r[0] for r in records]

    async def workflow_adopt(self, *, job_id: int, workflow_id: int, node: NodeState) -> None:
        """Make a job stored under a unique key in this transaction a workflow's node."""
        await self.db.execute(
            self._q.workflow_adopt, job_id, workflow_id, node.ref, node.status, node.parents,
            node.on_failure, node.run_if,
        )  # fmt: skip

    async def workflow_insert_edges(
        self, *, children: Sequence[int], parents: Sequence[int]
    ) -> None:
        await self.db.execute(self._q.workflow_insert_edges, list(children), list(parents))

    async def workflow_get(self, *, workflow_id: int) -> WorkflowRow | None:
        record = await self.db.fetchrow(self._q.workflow_get, workflow_id)
        return None if record is None else WorkflowRow(**dict(record.items()))

    async def workflow_jobs(self, *, workflow_id: int) -> list[tuple[str, list[str], Job]]:
        """Every job of the workflow: its ref, the refs it waits for, the job."""
        records = await self.db.fetch(self._q.workflow_jobs, workflow_id)
        return [(r["workflow_ref"], list(r["depends_on"]), Job.from_record(r)) for r in records]

    async def workflow_list(self, *, limit: int) -> list[WorkflowCounts]:
        """The ``limit`` newest workflows, newest first, with their jobs' state counts."""
        records = await self.db.fetch(self._q.workflow_list, limit)
        return [WorkflowCounts(**dict(r.items())) for r in records]

    async def workflow_parent_results(self, *, job_id: int) -> list[ParentResult]:
        records = await self.db.fetch(self._q.workflow_parent_results, job_id)
        return [
            ParentResult(
                r["ref"], r["status"], None if r["result"] is None else json.loads(r["result"])
            )
            for r in records
        ]

    async def workflow_cancel(self, *, workflow_id: int) -> list[Cancelled]:
        """Cancel every job of the workflow not ended yet (a running one asked to stop)."""
        rows = await self.db.fetch(self._q.workflow_cancel, workflow_id, self.clock.now())
        return [Cancelled(row["id"], row["status"]) for row in rows]

    async def workflow_retention_delete(
        self, *, completed_seconds: float | None, failed_seconds: float | None, limit: int
    ) -> int:
        """Delete up to ``limit`` workflows whose every job is past its retention (None:
        jobs in those states are kept, and their workflows); return how many."""
        status = await self.db.execute(
            self._q.workflow_retention_delete, completed_seconds, failed_seconds, limit,
            self.clock.now(),
        )  # fmt: skip
        return _count(status)
