"""The store's queries of queues: counts, controls, limits and the dashboard's minutes.
Part of the Store (db/store.py), which inherits it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from jobqueue.db.query_base import QueryBase, _count, _list
from jobqueue.db.records import (
    MinuteRow,
)
from jobqueue.model.job import QueueInfo
from jobqueue.model.limits import LimitsInfo

# Jobs waiting for a handler are counted among this many pending jobs at the front of
# each queue (queue_unhandled.sql): a bounded read per queue for the gauge and GET
# /queues, where an exact count would cost every enqueue an index entry. More counts
# deeper into a backlog, for more reads every leader round.
UNHANDLED_WINDOW = 10_000


class QueueQueries(QueryBase):
    # -- queues ----------------------------------------------------------------------

    async def queues_overview(self, *, name: str | None = None) -> list[QueueInfo]:
        """Every queue with jobs or controls (or the one named), from the counters, and
        its waiting jobs (durable sleeps), which the counters leave out."""
        records = await self.db.fetch(self._q.queues_overview, name, self.clock.now())
        asleep = await self.queue_sleeping(name=name)
        infos = [QueueInfo(**dict(r.items()), waiting=asleep.pop(r["name"], 0)) for r in records]
        if not asleep:
            return infos
        infos += [
            QueueInfo(queue, 0, 0, 0, 0, 0, False, None, None, waiting=n)
            for queue, n in asleep.items()
        ]
        return sorted(infos, key=lambda q: q.name)

    async def queue_sleeping(self, *, name: str | None = None) -> dict[str, int]:
        """The waiting jobs of each queue (or of the one named) that has any."""
        rows = await self.db.fetch(self._q.queue_sleeping, name)
        return {r["queue"]: r["waiting"] for r in rows}

    async def queue_unhandled(
        self, *, within_seconds: float, window: int = UNHANDLED_WINDOW
    ) -> list[tuple[str, str, int]]:
        """(queue, type, pending jobs) for each pair that no worker heartbeating within
        the last ``within_seconds`` would claim (no handler among those serving the
        queue), counted among the first ``window`` pending jobs of each queue."""
        rows = await self.db.fetch(
            self._q.queue_unhandled, within_seconds, self.clock.now(), window
        )
        return [(row[0], row[1], row[2]) for row in rows]

    async def queue_limited(self, *, queues: Sequence[str]) -> dict[str, bool]:
        """Which of ``queues`` have limits shared by every worker: whether each has a rate."""
        records = await self.db.fetch(self._q.queue_limited, list(queues))
        return {r["name"]: r["rated"] for r in records}

    async def limit_next_start(self, *, queue: str) -> float | None:
        """Seconds until rate-limited ``queue`` may start a job again (None: now)."""
        seconds: float | None = await self.db.fetchval(
            self._q.limit_next_start, queue, self.clock.now()
        )
        return seconds

    async def queue_limits_set(self, *, name: str, columns: str) -> None:
        """Set the limits ``columns`` names (JSON text, migration 0020's columns)."""
        await self.db.execute(self._q.queue_limits_set, name, columns, self.clock.now())

    async def queue_limits_overview(self, *, name: str | None = None) -> dict[str, LimitsInfo]:
        """Each limited queue's limits and their use, by queue name."""
        records = await self.db.fetch(self._q.queue_limits_overview, name, self.clock.now())
        return {r["name"]: LimitsInfo.from_record(r) for r in records}

    async def queue_counts_fold(self, *, limit: int) -> int:
        """Fold up to ``limit`` counter changes into the per-queue totals; return how many."""
        folded: int = await self.db.fetchval(self._q.queue_counts_fold, limit)
        return folded

    async def queue_counts_rotate(self, *, min_pages: int) -> float | None:
        """Empty the counter changes' idle partition if it holds more than
        ``min_pages`` pages and no rows; return the seconds left in this turn if the
        partition taking its writes is past ``min_pages`` too, else None."""
        turn_ends_in: float | None = await self.db.fetchval(self._q.queue_counts_rotate, min_pages)
        return turn_ends_in

    async def queue_minutes_waits(self, *, grace_seconds: float, sample: int) -> int:
        """Set the waits of the minutes ended ``grace_seconds`` ago, from ``sample`` jobs
        each at most; return how many minute rows were set."""
        written: int = await self.db.fetchval(
            self._q.queue_minutes_waits, grace_seconds, sample, self.clock.now()
        )
        return written

    async def queue_minutes_prune(self, *, keep_seconds: float) -> int:
        return _count(
            await self.db.execute(self._q.queue_minutes_prune, keep_seconds, self.clock.now())
        )

    async def queue_minutes_read(
        self, *, since: datetime, queues: Sequence[str] | None, bucket_seconds: float
    ) -> list[MinuteRow]:
        records = await self.db.fetch(
            self._q.queue_minutes_read, since, _list(queues), bucket_seconds
        )
        return [MinuteRow(**dict(r.items())) for r in records]

    async def queue_pause(self, *, name: str) -> None:
        await self.db.execute(self._q.queue_pause, name, self.clock.now())

    async def queue_resume(self, *, name: str) -> None:
        await self.db.execute(self._q.queue_resume, name, self.clock.now())
