"""What the dashboard, the API, the CLI and the test helpers read beyond a job, a queue
and a worker: pages of jobs, a queue's minutes and its later jobs, the jobs each
worker runs, the leader, the periodic jobs and the last job of each, the types live
workers handle, the audit log, and the schema's state. ``JobQueue.inspect`` serves
it, so that nothing above the facade opens the store itself
(tests/unit/test_structure.py holds that); each method is one query of the store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from jobqueue.config import Settings
from jobqueue.db.listener import Listener
from jobqueue.db.records import MinuteRow
from jobqueue.db.store import Store
from jobqueue.maintenance.leader import ROLE as LEADER_ROLE
from jobqueue.model import search
from jobqueue.model.audit import AuditEntry
from jobqueue.model.job import Job
from jobqueue.model.search import JobFilter, JobPage
from jobqueue.task import Task


class Source(Protocol):
    """What the inspector reads through: a JobQueue."""

    @property
    def settings(self) -> Settings: ...

    @property
    def direct_dsn(self) -> str | None: ...

    @property
    def tasks(self) -> Mapping[str, Task[Any, Any]]: ...

    async def store(self) -> Store: ...


class Inspector:
    def __init__(self, source: Source) -> None:
        self._source = source

    async def _store(self) -> Store:
        return await self._source.store()

    # -- jobs ------------------------------------------------------------------------

    async def jobs(self, where: JobFilter, *, after: int | None = None, limit: int = 50) -> JobPage:
        """A page of the jobs ``where`` finds, newest first; ``after`` (a page's
        ``next_after``) pages on. Tag and metadata filters are read from their
        indexes; a payload filter reads at most PAYLOAD_SCAN_ROWS jobs (docs/search.md)."""
        scan = search.PAYLOAD_SCAN_ROWS if where.payload is not None else None
        async with (await self._store()).transaction() as tx:
            await tx.plan_per_execution()
            few = False
            if where.tags or where.meta:
                labelled = search.FEW_LABELLED
                few = await tx.job_labels_count(where=where, at_most=labelled) < labelled
            found, stopped = await tx.jobs_search(
                where=where, before_id=after, limit=limit, scan=scan, by_labels=few
            )
        if stopped:  # the last one is where the scan stopped, whatever its payload
            return JobPage(found[:-1][:limit], found[-1].id + 1, truncated=True)
        if len(found) > limit:
            return JobPage(found[:limit], found[limit - 1].id)
        return JobPage(found, None)

    async def jobs_count(
        self,
        *,
        statuses: Sequence[str],
        types: Sequence[str] | None,
        queues: Sequence[str] | None,
        limit: int,
    ) -> int:
        """How many jobs match, counted up to ``limit`` at most (a bound on the scan)."""
        return await (await self._store()).jobs_count_bounded(
            statuses=statuses, types=types, queues=queues, limit=limit
        )

    async def jobs_changed_since(self, since: datetime) -> list[Job]:
        return await (await self._store()).jobs_changed_since(since=since)

    async def jobs_due_or_running(self) -> bool:
        return await (await self._store()).jobs_due_or_running()

    async def now(self) -> datetime:
        """The database's clock (or the JobQueue's test clock): what ``since`` is in."""
        return await (await self._store()).clock_now()

    # -- queues ----------------------------------------------------------------------

    async def queue_minutes(
        self, *, since: datetime, queues: Sequence[str] | None, bucket_seconds: float
    ) -> list[MinuteRow]:
        """Jobs enqueued, started and ended, and their waits, per bucket since ``since``."""
        return await (await self._store()).queue_minutes_read(
            since=since, queues=queues, bucket_seconds=bucket_seconds
        )

    async def queues_later(
        self, queues: Sequence[str], *, limit: int
    ) -> dict[str, tuple[int, int]]:
        """Each queue's (scheduled, retrying) jobs, each sum counted up to ``limit``."""
        return await (await self._store()).queues_later(queues=queues, limit=limit)

    async def queue_waiting(self, queue: str, *, limit: int) -> list[Job]:
        """The queue's due jobs, in the order they will be claimed."""
        return await (await self._store()).queue_waiting(queue=queue, limit=limit)

    # -- workers ---------------------------------------------------------------------

    async def running_jobs(self, *, limit: int) -> list[Job]:
        """The jobs running now, each with the worker that runs it."""
        return await (await self._store()).workers_jobs(limit=limit)

    async def leader(self) -> str | None:
        """The worker that holds the maintenance lead, if one does."""
        return await (await self._store()).leader_holder(role=LEADER_ROLE)

    async def handled_types(self, queue: str) -> list[str]:
        """The types that live workers of ``queue`` announce handlers for."""
        within = self._source.settings.lease_seconds
        return await (await self._store()).workers_types(within_seconds=within, queue=queue)

    async def done_listener(self, on_done: Callable[[str | None], None]) -> Listener:
        """A listener (not yet running) of the jobs that end, on its own connection."""
        store = await self._store()
        return Listener(self._source.direct_dsn, store.schema, store.done_channel, on_done)

    # -- the audit log ---------------------------------------------------------------

    async def audit_entries(
        self, *, actor: str | None, action: str | None, before_id: int | None, limit: int
    ) -> list[AuditEntry]:
        """The audit log, newest first; ``before_id`` pages on."""
        return await (await self._store()).audit_list(
            actor=actor, action=action, before_id=before_id, limit=limit
        )

    # -- the schema ------------------------------------------------------------------

    async def schema_tables(self) -> set[str]:
        return await (await self._store()).schema_tables()

    async def migrations_applied(self) -> set[int]:
        return await (await self._store()).migrations_applied()
