"""The store's queries that find jobs (jobqueue.model.search, docs/search.md)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from jobqueue.db.query_base import QueryBase, _list
from jobqueue.model.job import Job

if TYPE_CHECKING:
    from jobqueue.model.search import JobFilter


class SearchQueries(QueryBase):
    async def plan_per_execution(self) -> None:
        """Plan each query for its values until the transaction ends (in one)."""
        await self.db.execute(self._q.plan_per_execution)

    async def job_labels_count(self, *, where: JobFilter, at_most: int) -> int:
        """How many jobs carry ``where``'s tags and metadata, counted up to ``at_most``."""
        found: int = await self.db.fetchval(
            self._q.job_labels_count, _list(where.tags), _json(where.meta), at_most
        )
        return found

    async def jobs_search(
        self,
        *,
        where: JobFilter,
        before_id: int | None,
        limit: int,
        scan: int | None,
        by_labels: bool = False,
    ) -> tuple[list[Job], bool]:
        """Up to ``limit`` + 1 jobs newest first, the one past ``limit`` saying that a
        next page exists, and whether a payload filter stopped after ``scan`` jobs:
        then the last job returned is the last one read, whatever its payload.
        ``by_labels``: read the jobs that carry ``where``'s tags and metadata by their
        ids (few carry them), rather than newest first (jobs_search.sql)."""
        records = await self.db.fetch(
            self._q.jobs_search,
            where.status, _list(where.types), _list(where.queues), where.created_since,
            where.created_before, before_id, limit, where.due, self.clock.now(),
            _list(where.tags), _json(where.meta), limit if scan is None else scan,
            _json(where.payload), by_labels,
        )  # fmt: skip
        stopped = scan is not None and bool(records) and records[-1]["scanned"] > scan
        return [Job.from_record(r) for r in records], stopped


def _json(value: object) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))
