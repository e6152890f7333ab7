"""Benchmark runner for PgQueuer 1.6.0 on asyncpg (protocol: see bench/harness.py).

Run with the python of a virtualenv holding ``pgqueuer==1.6.0`` and ``asyncpg``.
Setting as in shared/PEERS.md: one asyncpg connection per worker, ``batch_size=100``, no
concurrency cap (``max_concurrent_tasks=None``, the library's "unlimited").
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import asyncpg
from pgqueuer import Job, QueueManager
from pgqueuer.db import AsyncpgDriver, AsyncpgPoolDriver
from pgqueuer.errors import FailingListenerError
from pgqueuer.queries import Queries

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import harness

ENTRYPOINT = "bench"
BATCH_SIZE = 100
READY_PROBE = timedelta(seconds=0.2)

# A finished job leaves three log rows: queued at enqueue, picked at dequeue, then its outcome.
HISTORY_SQL = """
INSERT INTO pgqueuer_log (created, job_id, status, priority, entrypoint, aggregated)
SELECT now() - make_interval(secs => (%(h)d - g) / 1000.0), g, s.status::pgqueuer_status, 0,
       'bench', true
FROM generate_series(1, %(h)d) AS g
CROSS JOIN (VALUES ('queued'), ('picked'), ('successful')) AS s(status)
"""
# Aggregated log rows are counted in the statistics table, one row per second and status.
HISTORY_STATS_SQL = """
INSERT INTO pgqueuer_statistics (created, count, priority, status, entrypoint)
SELECT date_trunc('sec', now()) - make_interval(secs => sec), count(*), 0, s.status, 'bench'
FROM (SELECT (%(h)d - g) / 1000 AS sec FROM generate_series(1, %(h)d) AS g) AS jobs
CROSS JOIN (VALUES ('queued'::pgqueuer_status), ('picked'), ('successful')) AS s(status)
GROUP BY sec, s.status
"""


class PgQueuerAdapter(harness.Adapter):
    default_concurrency = None

    async def open(self) -> None:
        self.connection = await asyncpg.connect(self.dsn)
        self.queries = Queries(AsyncpgDriver(self.connection))

    async def close(self) -> None:
        if getattr(self, "pool", None) is not None:
            await self.pool.close()
        await self.connection.close()

    async def open_concurrent(self, clients: int) -> None:
        # One asyncpg connection runs one query at a time: concurrent callers need a pool.
        self.pool = await asyncpg.create_pool(self.dsn, min_size=clients, max_size=clients)
        self.queries = Queries(AsyncpgPoolDriver(self.pool))

    async def execute(self, statement: str) -> None:
        await self.connection.execute(statement)

    async def setup(self) -> None:
        await self.execute("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public")
        await self.queries.install()

    async def empty(self) -> None:
        await self.execute(
            "TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics, pgqueuer_schedules"
        )

    async def enqueue_one(self, seq: int | None) -> None:
        payload = None if seq is None else str(seq).encode()
        await self.queries.enqueue(ENTRYPOINT, payload)

    async def enqueue_batch(self, count: int) -> None:
        await self.queries.enqueue([ENTRYPOINT] * count, [None] * count, [0] * count)

    async def add_history(self, count: int) -> str:
        await self.execute(HISTORY_SQL % {"h": count})
        await self.execute(HISTORY_STATS_SQL % {"h": count})
        # New jobs get ids after the history's, as they would in a live system.
        await self.execute(f"SELECT setval(pg_get_serial_sequence('pgqueuer', 'id'), {count})")
        return (
            "PgQueuer deletes finished jobs from its queue table (pgqueuer) and keeps them in "
            f"pgqueuer_log: history = {count} jobs x 3 log rows (queued, picked, successful; "
            "already aggregated) plus their per-second rows in pgqueuer_statistics; the queue "
            "table holds only the pending jobs"
        )

    async def has_unfinished(self) -> bool:
        # Finished jobs are deleted from the queue table, so any row left is unfinished. The
        # primary key skips the deleted rows cheaply, where a sequential scan would wade
        # through them on every poll.
        row = await self.connection.fetchrow("SELECT id FROM pgqueuer ORDER BY id LIMIT 1")
        return row is not None

    async def counts(self) -> tuple[int, int]:
        unfinished = await self.connection.fetchval(
            "SELECT count(*) FROM pgqueuer WHERE status IN ('queued', 'picked')"
        )
        finished = await self.connection.fetchval(
            "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'"
        )
        return unfinished, finished

    def describe_concurrency(self, concurrency: int | None) -> int | str:
        batch_size, cap = _settings(concurrency)
        limit = "unlimited" if cap is None else f"max_concurrent_tasks={cap}"
        return f"{limit}, batch_size={batch_size}"

    async def run_worker(
        self,
        concurrency: int | None,
        on_job: harness.JobHook,
        ready: Callable[[], None],
        stop: asyncio.Event,
    ) -> None:
        batch_size, cap = _settings(concurrency)
        connection = await asyncpg.connect(self.dsn)
        try:
            manager = QueueManager(Queries(AsyncpgDriver(connection)))

            @manager.entrypoint(ENTRYPOINT)
            async def bench(job: Job) -> None:
                on_job(int(job.payload) if job.payload else None)

            run = asyncio.create_task(manager.run(batch_size=batch_size, max_concurrent_tasks=cap))
            try:
                await _wait_listening(manager, run)
                ready()
                stopping = asyncio.create_task(stop.wait())
                await asyncio.wait({run, stopping}, return_when=asyncio.FIRST_COMPLETED)
                stopping.cancel()
            finally:
                manager.shutdown.set()
                await run
        finally:
            await connection.close()


def _settings(concurrency: int | None) -> tuple[int, int | None]:
    """(batch_size, max_concurrent_tasks) for ``--concurrency``: omitted or 0 is PgQueuer's
    unlimited; a cap must be at least twice the batch size, so small caps shrink the batch."""
    if not concurrency:
        return BATCH_SIZE, None
    if concurrency < 2:
        raise ValueError("PgQueuer needs a concurrency of at least 2 (twice the batch size)")
    return min(BATCH_SIZE, concurrency // 2), concurrency


async def _wait_listening(manager: QueueManager, run: asyncio.Task[None]) -> None:
    # The library's own NOTIFY round-trip probe succeeds only once its listener is up.
    while True:
        if run.done():
            await run
            raise RuntimeError("the queue manager stopped before it was listening")
        try:
            await manager.listener_healthy(timeout=READY_PROBE)
            return
        except FailingListenerError:
            continue


if __name__ == "__main__":
    harness.main(PgQueuerAdapter)
