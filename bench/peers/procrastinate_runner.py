"""Benchmark runner for procrastinate 3.10.0 on psycopg 3 (protocol: see bench/harness.py).

Run with the python of a virtualenv holding ``procrastinate==3.10.0`` and ``psycopg[binary]``.
Setting as in shared/PEERS.md: one worker with ``concurrency=10`` and the library's defaults
otherwise (psycopg pool of 4 connections, LISTEN/NOTIFY on, finished jobs kept).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import procrastinate
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import harness

TASK = "bench"
CONCURRENCY = 10

# A finished job stays in procrastinate_jobs as 'succeeded', with the three events its status
# triggers would have written. Runs on an empty table, so every row is history.
HISTORY_SQL = """
INSERT INTO procrastinate_jobs (queue_name, task_name, args, status, attempts)
SELECT 'default', 'bench', '{}', 'succeeded', 1 FROM generate_series(1, %(h)d);
INSERT INTO procrastinate_events (job_id, type, at)
SELECT job.id, event.type::procrastinate_job_event_type,
       now() - make_interval(secs => (%(h)d - job.id) / 1000.0)
FROM procrastinate_jobs AS job
CROSS JOIN (VALUES ('deferred'), ('started'), ('succeeded')) AS event(type)
"""
# Replica mode skips the per-row foreign-key checks, which would otherwise dominate the insert;
# only a superuser may set it, so others take the slower way.
REPLICA_SQL = "SET session_replication_role = replica; {}; RESET session_replication_role"


class ListeningConnector(procrastinate.PsycopgConnector):
    """Tells when the worker's LISTEN is in place: procrastinate has no public hook for it, so
    this wraps the private loop it enters right after issuing LISTEN."""

    on_listening: Callable[[], None] | None = None

    async def _loop_notify(self, *args: Any, **kwargs: Any) -> None:
        if self.on_listening is not None:
            self.on_listening()
            self.on_listening = None
        await super()._loop_notify(*args, **kwargs)


class ProcrastinateAdapter(harness.Adapter):
    default_concurrency = CONCURRENCY

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self.connector = ListeningConnector(conninfo=dsn)
        self.app = procrastinate.App(connector=self.connector)
        self.on_job: harness.JobHook = lambda seq: None

        @self.app.task(name=TASK)
        async def bench(seq: int | None = None) -> None:
            self.on_job(seq)

        self.task = bench

    async def open(self) -> None:
        self.connection = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        await self.app.open_async()

    async def close(self) -> None:
        await self.app.close_async()
        if getattr(self, "pool", None) is not None:
            await self.pool.close()
        await self.connection.close()

    async def open_concurrent(self, clients: int) -> None:
        # The default pool has 4 connections; an application serving 16 requests at once
        # would give it one per request. Handed over by the public open_async(pool).
        import psycopg_pool

        await self.app.close_async()
        self.pool = psycopg_pool.AsyncConnectionPool(
            self.dsn,
            min_size=clients,
            max_size=clients,
            open=False,
            check=psycopg_pool.AsyncConnectionPool.check_connection,
        )
        await self.pool.open(wait=True)
        await self.app.open_async(self.pool)

    async def execute(self, statement: str) -> None:
        await self.connection.execute(statement)  # type: ignore[arg-type]

    async def fetch_one(self, statement: str) -> tuple[Any, ...]:
        cursor = await self.connection.execute(statement)  # type: ignore[arg-type]
        row = await cursor.fetchone()
        assert row is not None
        return row

    async def setup(self) -> None:
        await self.execute("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public")
        await self.app.schema_manager.apply_schema_async()

    async def empty(self) -> None:
        await self.execute(
            "TRUNCATE procrastinate_events, procrastinate_periodic_defers, procrastinate_jobs,"
            " procrastinate_workers"
        )

    async def enqueue_one(self, seq: int | None) -> None:
        if seq is None:
            await self.task.defer_async()
        else:
            await self.task.defer_async(seq=seq)

    async def enqueue_batch(self, count: int) -> None:
        await self.task.batch_defer_async(*({} for _ in range(count)))

    async def add_history(self, count: int) -> str:
        history = HISTORY_SQL % {"h": count}
        (superuser,) = await self.fetch_one("SELECT current_setting('is_superuser') = 'on'")
        await self.execute(REPLICA_SQL.format(history.strip()) if superuser else history)
        return (
            "procrastinate keeps finished jobs in procrastinate_jobs (status 'succeeded', "
            f"the default delete_jobs='never'): history = {count} such rows plus 3 rows each "
            "in procrastinate_events (deferred, started, succeeded)"
        )

    async def has_unfinished(self) -> bool:
        # Ordered by id so the plan is the library's partial index on (id, lock) for todo and
        # doing jobs, never a scan through the finished history.
        cursor = await self.connection.execute(
            "SELECT id FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
            " ORDER BY id LIMIT 1"
        )
        return await cursor.fetchone() is not None

    async def counts(self) -> tuple[int, int]:
        unfinished, finished = await self.fetch_one(
            "SELECT count(*) FILTER (WHERE status IN ('todo', 'doing')),"
            " count(*) FILTER (WHERE status = 'succeeded') FROM procrastinate_jobs"
        )
        return unfinished, finished

    def describe_concurrency(self, concurrency: int | None) -> int:
        return concurrency or CONCURRENCY

    async def run_worker(
        self,
        concurrency: int | None,
        on_job: harness.JobHook,
        ready: Callable[[], None],
        stop: asyncio.Event,
    ) -> None:
        self.on_job = on_job
        self.connector.on_listening = ready
        async with self.app.open_async():
            worker = asyncio.create_task(
                self.app.run_worker_async(
                    concurrency=concurrency or CONCURRENCY,
                    # The harness owns SIGTERM; cancelling the task is the library's
                    # documented graceful stop.
                    install_signal_handlers=False,
                )
            )
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({worker, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if worker.done():
                worker.result()
                raise RuntimeError("the procrastinate worker stopped on its own")
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker


if __name__ == "__main__":
    harness.main(ProcrastinateAdapter)
