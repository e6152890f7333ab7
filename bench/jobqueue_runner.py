"""The benchmark runner for jobqueue (protocol: bench/harness.py).

Jobs are enqueued through the Python API (`enqueue`, `enqueue_many`) and run by the
same Worker that `jobqueue worker` runs. Two more commands time the database alone, on
the same table: `raw_copy`, a plain COPY of the rows `enqueue_bulk` writes, and
`raw_insert`, a bare loop of one-row INSERTs, the ceiling of `enqueue_single` (each
is one commit, so one WAL flush, and the disk sets the pace).

`drain_mixed` is `drain` with the job-control features in use: jobs spread over four
queues (two of them capped, `mail=400` and `reports=200`) and ten priorities, with
priority aging on. The variable JQBENCH_MIXED carries it to the worker processes.

`drain_metrics` is `drain` with Prometheus metrics on, as in a worker with
JOBQUEUE_METRICS_PORT (without serving the port: nothing scrapes); JQBENCH_METRICS
carries it to the worker processes.

`drain_workflow_fanout` and `drain_workflow_chain` are `drain` with the jobs made by
one workflow (bench/workflows.py); JQBENCH_WORKFLOW carries the shape to `fill`.
`workflow_release` times the completions that release children (bench/workflows.py).

`drain_50types` and `drain_any_type` are `drain` with the claim's type filter at its
widest and with none: the worker has 50 tasks (`bench`, `bench_result` and 48 that no
job uses; `drain`'s has the first two), or claims every type (`claim_any_type`, no
filter in the claim). JQBENCH_TYPES carries it to the worker processes.

`sql_floor` is the claim-and-complete loop alone: `--n` pending jobs in jobqueue's own
table, claimed `--batch` at a time (the worker's claim batch) with claim.sql and
completed with complete.sql, both prepared, one after the other on one connection with
the pool's session settings, until none is left. No handler, no task, no client work
but building each completion's arguments: what PostgreSQL alone makes of a drain.

`result_roundtrip` is a job's whole trip as an application sees it: `jq.enqueue` of a
job whose handler returns a result, then `jq.wait` until that result is seen, timed
from before the enqueue to the wait's return; `--n` jobs `--interval-ms` apart into
one idle worker process.

`result_roundtrip_floor` is the same trip with no jobqueue code but its statements
(bench/roundtrip_floor.py): what PostgreSQL and two processes make of it.

`pressure` offers jobs at a fixed rate (`--rate`, 200 jobs/s) to one worker process,
and for `--hold` seconds (120) of it keeps another session idle in a transaction,
holding back the cluster's xmin, as a forgotten `BEGIN` or a long report does: no
dead row version can be removed meanwhile. It reports throughput and pickup latency
(handler start minus the enqueue's return) before and during the hold, and each of
our tables' size and dead tuples before, at the end of the hold, after two VACUUMs a
leader round apart run while the load goes on (`vacuumed_under_load`, ending a round
before it stops), `--after` seconds (60) after the hold, and after two more VACUUMs
once the load has stopped (`vacuumed`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
import roundtrip_floor
import workflows

from jobqueue import logs, observability
from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.db.migrate import migrate
from jobqueue.db.pool import SESSION_SETTINGS
from jobqueue.db.sql import queries
from jobqueue.worker import Worker

SCHEMA = "jobqueue"
MIXED = os.environ.get("JQBENCH_MIXED") == "1"
# The `*_pgbouncer` workloads: the same database through PgBouncer (bench/pgbouncer.py),
# LISTEN and the runner's own connection direct.
POOLER = os.environ.get("JQBENCH_POOLER_DSN") if os.environ.get("JQBENCH_PGBOUNCER") else None
METRICS = os.environ.get("JQBENCH_METRICS") == "1"
MIXED_QUEUES = ("default", "mail=400", "reports=200", "bulk")
WORKFLOW = os.environ.get("JQBENCH_WORKFLOW")
TYPES = os.environ.get("JQBENCH_TYPES")  # "50": that many tasks; "any": every type claimed
# Tags and meta on every job enqueued (the *_tagged workloads): what they cost, against
# the same workload with neither set, run right after it in every round.
TAGS = ["bench", "customer:acme"] if os.environ.get("JQBENCH_TAGGED") == "1" else None
META = {"customer": "acme", "user_id": 42} if TAGS else None


class JobqueueAdapter(harness.Adapter):
    # WORKER_COUNT for every workload. Claims take at most 500 jobs, so at 1000 one
    # batch runs while the next is claimed; the peak RSS reported is at this setting.
    default_concurrency = 1000

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        # Per-job log lines off, as for every peer: the queue is measured, not the logger.
        self.settings = Settings(
            database_url=POOLER or dsn,
            direct_database_url=dsn if POOLER else None,
            schema=SCHEMA,
            log_level="warning",
        )

    async def open(self) -> None:
        logs.configure("warning")
        self.jq = JobQueue(settings=self.settings)
        self.conn: asyncpg.Connection = await asyncpg.connect(self.dsn)

    async def close(self) -> None:
        await self.jq.close()
        await self.conn.close()

    async def setup(self) -> None:
        await self.conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
        await migrate(self.conn, SCHEMA)

    async def execute(self, statement: str) -> None:
        await self.conn.execute(statement)

    async def empty(self) -> None:
        await self.conn.execute(
            f'TRUNCATE "{SCHEMA}".jobs, "{SCHEMA}".workflows, "{SCHEMA}".workflow_edges '
            "RESTART IDENTITY CASCADE"
        )

    async def enqueue_one(self, seq: int | None) -> None:
        payload = None if seq is None else {"seq": seq}
        if TAGS is None:
            await self.jq.enqueue("bench", payload)
        else:
            await self.jq.enqueue("bench", payload, tags=TAGS, meta=META)

    async def open_concurrent(self, clients: int) -> None:
        # Open the connections concurrent calls use now, not inside the timed part (the
        # peers' adapters open pools of `clients` connections).
        pool = await self.jq.pool()
        held = [await pool.acquire() for _ in range(min(clients, 4))]
        for conn in held:
            await pool.release(conn)

    async def enqueue_batch(self, count: int) -> None:
        if TAGS is None:
            await self.jq.enqueue_many("bench", [{}] * count)
        else:
            await self.jq.enqueue_many("bench", [{}] * count, tags=TAGS, meta=META)

    async def fill(self, count: int) -> None:
        if WORKFLOW:
            await workflows.fill(self.jq, WORKFLOW, count)
            return
        if not MIXED:
            await super().fill(count)
            return
        names = [q.partition("=")[0] for q in MIXED_QUEUES]
        await self.conn.execute(
            f"""INSERT INTO "{SCHEMA}".jobs (type, queue, priority)
                SELECT 'bench', ($2::text[])[1 + g % 4], g % 10 FROM generate_series(1, $1) AS g""",
            count,
            names,
        )

    async def add_history(self, count: int) -> str:
        await self.conn.execute(
            f"""INSERT INTO "{SCHEMA}".jobs (type, status, attempts, started_at, finished_at)
                SELECT 'bench', 'completed', 1, now(), now() FROM generate_series(1, $1)""",
            count,
        )
        return "finished jobs kept as completed rows of jobqueue.jobs"

    async def has_unfinished(self) -> bool:
        # Two index probes (pending, running): cheap enough to poll every 10 ms. The ORDER
        # BY is what makes them probes: an EXISTS drops it, and then, with finished jobs
        # kept ahead of the pending ones, the planner expects the first pending row within
        # a few pages and scans the whole table (100 ms each at 1M, every 10 ms).
        found: bool = await self.conn.fetchval(
            f"""SELECT (SELECT id FROM "{SCHEMA}".jobs WHERE status = 'pending'
                        ORDER BY queue, priority, run_at, id LIMIT 1) IS NOT NULL
                    OR (SELECT id FROM "{SCHEMA}".jobs WHERE status = 'running'
                        ORDER BY lease_expires_at LIMIT 1) IS NOT NULL"""
        )
        return found

    async def counts(self) -> tuple[int, int]:
        row = await self.conn.fetchrow(
            f"""SELECT count(*) FILTER (WHERE status IN ('blocked', 'pending', 'running')),
                       count(*) FILTER (WHERE status = 'completed')
                FROM "{SCHEMA}".jobs"""
        )
        return row[0], row[1]

    async def run_worker(
        self,
        concurrency: int | None,
        on_job: harness.JobHook,
        ready: Callable[[], None],
        stop: asyncio.Event,
    ) -> None:
        logs.configure("warning")
        settings = dataclasses.replace(
            self.settings,
            worker_count=concurrency or self.default_concurrency,
            queues=MIXED_QUEUES if MIXED else self.settings.queues,
            claim_any_type=TYPES == "any",
        )
        jq = JobQueue(settings=settings)

        @jq.task("bench")
        async def bench(payload: dict[str, Any]) -> None:
            on_job(payload.get("seq"))

        @jq.task("bench_result")  # result_roundtrip's: a handler with a result
        async def bench_result(payload: dict[str, Any]) -> dict[str, Any]:
            on_job(payload.get("seq"))
            return {"seq": payload.get("seq"), "ok": True}

        if TYPES is not None and TYPES.isdigit():  # tasks of types that no job has
            for n in range(int(TYPES) - len(jq.tasks)):
                jq.task(f"bench_unused_{n}")(unused)

        metrics = observability.start_metrics(settings, jq.tasks, http=True) if METRICS else None
        worker = Worker(await jq.pool(), jq.direct_dsn, settings, jq.tasks)
        await worker.start()
        if metrics is not None:
            metrics.watch(await jq.pool(), worker, None)
        await worker.listener.listening.wait()
        ready()
        await stop.wait()
        await worker.stop(asyncio.Event())
        if metrics is not None:
            await metrics.stop()
            counted = sum(s.value for f in metrics.registry.collect() for s in f.samples
                          if s.name == "jobqueue_jobs_finished_total")  # fmt: skip
            harness.log(f"metrics on: {counted:g} attempts counted")
        await jq.close()


async def unused(payload: dict[str, Any]) -> None:
    """The handler of drain_50types' tasks that no job has."""


async def raw_copy(dsn: str, n: int, batch: int) -> dict[str, Any]:
    """COPY the rows enqueue_many writes (type, queue, payload), batch by batch."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'TRUNCATE "{SCHEMA}".jobs RESTART IDENTITY CASCADE')
        await conn.execute("CHECKPOINT")
        rows = [("bench", "default", "{}")] * batch
        started = time.monotonic()
        for start in range(0, n, batch):
            await conn.copy_records_to_table(
                "jobs",
                schema_name=SCHEMA,
                columns=["type", "queue", "payload"],
                records=rows[: min(batch, n - start)],
            )
        seconds = time.monotonic() - started
    finally:
        await conn.close()
    return {"jobs": n, "seconds": round(seconds, 4), "rate": round(n / seconds, 2)}


async def raw_insert(dsn: str, n: int) -> dict[str, Any]:
    """One prepared one-row INSERT per job, each its own transaction, one after another."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'TRUNCATE "{SCHEMA}".jobs RESTART IDENTITY CASCADE')
        await conn.execute("CHECKPOINT")
        insert = await conn.prepare(
            f'INSERT INTO "{SCHEMA}".jobs (type, queue, payload) VALUES ($1, $2, $3) RETURNING id'
        )
        started = time.monotonic()
        for _ in range(n):
            await insert.fetchval("bench", "default", "{}")
        seconds = time.monotonic() - started
    finally:
        await conn.close()
    return {"jobs": n, "seconds": round(seconds, 4), "rate": round(n / seconds, 2)}


@contextlib.asynccontextmanager
async def one_worker(dsn: str) -> AsyncIterator[harness.WorkerPool]:
    """One worker process of this runner's, ready and settled, for the block."""
    with (
        tempfile.TemporaryDirectory(prefix="jqbench-") as tmp,
        harness.WorkerPool(1, harness._worker_args(dsn, None, 0.0), Path(tmp)) as pool,
    ):
        await pool.wait_ready(harness.READY_TIMEOUT_S)
        await asyncio.sleep(harness.READY_SETTLE_S)
        yield pool


async def sql_floor(dsn: str, n: int, batch: int) -> dict[str, Any]:
    """Claim ``batch`` jobs and complete them, on one connection, until none is left."""
    adapter = JobqueueAdapter(dsn)
    await adapter.open()
    conn = await asyncpg.connect(dsn, server_settings=dict(SESSION_SETTINGS))
    try:
        await adapter.empty()
        await adapter.fill(n)
        await adapter.analyze()
        await adapter.checkpoint()
        q = queries(SCHEMA)
        claim, complete = await conn.prepare(q.claim), await conn.prepare(q.complete)
        started = time.monotonic()
        while rows := await claim.fetch("default", batch, "floor", 30.0, *[None] * 5):
            held = "{" + ",".join(f'"{r[0]}":{r[10]}' for r in rows) + "}"
            await complete.fetch([r[0] for r in rows], held, "floor", "completed", *[None] * 3)
        seconds = time.monotonic() - started
        left, done = await adapter.counts()
        if left or done != n:
            raise RuntimeError(f"sql_floor: {left} jobs left, {done} completed of {n}")
    finally:
        await conn.close()
        await adapter.close()
    return {"jobs": n, "seconds": round(seconds, 4), "rate": round(n / seconds, 2)}


async def result_roundtrip(dsn: str, n: int, interval_ms: float) -> dict[str, Any]:
    """enqueue, then wait for the result, timed by the caller, into an idle worker."""
    adapter = JobqueueAdapter(dsn)
    await adapter.open()
    trips: list[float] = []
    try:
        await adapter.empty()
        await adapter.checkpoint()
        async with one_worker(dsn):
            await adapter.jq.wait((await adapter.jq.enqueue("bench_result", {})).id, 30)
            schedule = time.monotonic()
            for seq in range(n):
                delay = schedule + seq * interval_ms / 1000 - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                sent = time.monotonic()
                job = await adapter.jq.wait(
                    (await adapter.jq.enqueue("bench_result", {"seq": seq})).id, 30
                )
                trips.append((time.monotonic() - sent) * 1000.0)
                if job.result != {"seq": seq, "ok": True}:
                    raise RuntimeError(f"result_roundtrip: job {job.id} ended {job.status}")
    finally:
        await adapter.close()
    return {**harness.spread(trips), "jobs": n}


async def roundtrip_floor_run(dsn: str, n: int, interval_ms: float) -> dict[str, Any]:
    """result_roundtrip's trip in jobqueue's own table with no jobqueue code but its
    statements (bench/roundtrip_floor.py)."""
    adapter = JobqueueAdapter(dsn)
    await adapter.open()
    try:
        await adapter.empty()
        await adapter.checkpoint()
    finally:
        await adapter.close()
    return await roundtrip_floor.trips(dsn, SCHEMA, n, interval_ms)


async def pressure(
    dsn: str, rate: float, before: float, hold: float, after: float
) -> dict[str, Any]:
    adapter = JobqueueAdapter(dsn)
    await adapter.open()
    holder = await asyncpg.connect(dsn)
    try:
        await adapter.empty()
        await adapter.execute(f'VACUUM "{SCHEMA}".jobs')
        await adapter.checkpoint()
        async with one_worker(dsn) as pool:
            tables = {"before": await table_stats(adapter.conn)}
            commits: list[float] = []
            schedule = time.monotonic()
            hold_from, hold_to = schedule + before, schedule + before + hold
            end = hold_to + after
            holding = False
            seq = 0

            async def vacuum_under_load() -> None:
                """Two VACUUMs a leader round apart, ending a round before the load
                stops: what vacuum gives back while jobs keep running."""
                round_ = adapter.settings.rescue_interval
                await asyncio.sleep(max(hold_to + after - 3 * round_ - time.monotonic(), 0))
                conn = await asyncpg.connect(dsn)
                try:
                    await conn.execute("VACUUM")
                    await asyncio.sleep(2 * round_)
                    await conn.execute("VACUUM")
                    tables["vacuumed_under_load"] = await table_stats(conn)
                finally:
                    await conn.close()

            vacuuming = asyncio.create_task(vacuum_under_load())
            while (at := schedule + seq / rate) < end:
                now = time.monotonic()
                if not holding and now >= hold_from and hold_to > now:
                    await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                    await holder.fetchval("SELECT txid_current()")
                    holding = True
                elif holding and now >= hold_to:
                    tables["hold_end"] = await table_stats(adapter.conn)
                    await holder.execute("ROLLBACK")
                    holding = False
                if at > now:
                    await asyncio.sleep(at - now)
                await adapter.enqueue_one(seq)
                commits.append(time.monotonic())
                seq += 1

            await vacuuming

            def all_started() -> bool:
                return len(pool.marks()[0].jobs) >= seq

            await harness.wait_until(all_started, timeout=60, pool=pool)
            starts = pool.marks()[0].jobs
            tables["after"] = await table_stats(adapter.conn)
            # Vacuum frees the pages, the leader's next fold (within its 5 s round) then
            # empties the last ones, written just before, and a second vacuum cuts them off.
            await adapter.execute("VACUUM")
            await asyncio.sleep(2 * adapter.settings.rescue_interval)
            await adapter.execute("VACUUM")
            tables["vacuumed"] = await table_stats(adapter.conn)
    finally:
        await holder.close()
        await adapter.close()

    def phase(since: float, until: float) -> dict[str, float]:
        picked = [(starts[i] - commits[i]) * 1000.0 for i in range(seq)
                  if since <= commits[i] - schedule < until]  # fmt: skip
        # Jobs started within the window, per second of it.
        started = sum(1 for t in starts.values() if since <= t - schedule < until)
        return {
            "rate": round(started / (until - since), 1),
            "p50_ms": round(harness.percentile(picked, 50), 3),
            "p99_ms": round(harness.percentile(picked, 99), 3),
        }

    phases = {"before": phase(0, before), "hold": phase(before, before + hold),
              "after": phase(before + hold, before + hold + after)}  # fmt: skip
    return {
        "offered_rate": rate,
        "hold_seconds": hold,
        "before_rate": phases["before"]["rate"],
        "hold_rate": phases["hold"]["rate"],
        "hold_throughput_ratio": round(phases["hold"]["rate"] / phases["before"]["rate"], 3),
        "before_p50_ms": phases["before"]["p50_ms"],
        "hold_p50_ms": phases["hold"]["p50_ms"],
        "before_p99_ms": phases["before"]["p99_ms"],
        "hold_p99_ms": phases["hold"]["p99_ms"],
        "phases": phases,
        "tables": tables,
    }


async def table_stats(conn: asyncpg.Connection) -> dict[str, dict[str, int]]:
    """Each of our tables' size with its indexes (and the claim index's alone), and its
    dead tuples as the statistics views have them (up to a few seconds behind)."""
    rows = await conn.fetch(
        """SELECT c.relname, pg_total_relation_size(c.oid) AS bytes,
                  COALESCE(s.n_dead_tup, 0) AS dead
           FROM pg_class AS c
           JOIN pg_namespace AS n ON n.oid = c.relnamespace
           LEFT JOIN pg_stat_user_tables AS s ON s.relid = c.oid
           WHERE n.nspname = $1 AND c.relkind IN ('r', 'i') AND (c.relkind = 'r'
                 OR c.relname = 'jobs_claim_idx')
           ORDER BY c.relname""",
        SCHEMA,
    )
    return {r["relname"]: {"kib": r["bytes"] // 1024, "dead": r["dead"]} for r in rows}


if __name__ == "__main__":
    if sys.argv[1:2] == ["pressure"]:
        parser = argparse.ArgumentParser(prog="pressure")
        parser.add_argument("--dsn", required=True)
        parser.add_argument("--rate", type=float, default=200.0)
        parser.add_argument("--before", type=float, default=30.0)
        parser.add_argument("--hold", type=float, default=120.0)
        parser.add_argument("--after", type=float, default=60.0)
        a = parser.parse_args(sys.argv[2:])
        harness.emit(asyncio.run(pressure(a.dsn, a.rate, a.before, a.hold, a.after)))
        sys.exit(0)
    if sys.argv[1:2] == ["sql_floor"]:
        args = harness.parse_args(["enqueue_bulk", *sys.argv[2:]])
        harness.emit(asyncio.run(sql_floor(args.dsn, args.n, args.batch)))
        sys.exit(0)
    if sys.argv[1:2] == ["result_roundtrip"]:
        args = harness.parse_args(["latency", *sys.argv[2:]])
        harness.emit(asyncio.run(result_roundtrip(args.dsn, args.n, args.interval_ms)))
        sys.exit(0)
    if sys.argv[1:2] == ["result_roundtrip_floor"]:
        args = harness.parse_args(["latency", *sys.argv[2:]])
        harness.emit(asyncio.run(roundtrip_floor_run(args.dsn, args.n, args.interval_ms)))
        sys.exit(0)
    if sys.argv[1:2] == ["raw_copy"]:
        args = harness.parse_args(["enqueue_bulk", *sys.argv[2:]])
        harness.emit(asyncio.run(raw_copy(args.dsn, args.n, args.batch)))
        sys.exit(0)
    if sys.argv[1:2] == ["drain_metrics"]:
        os.environ["JQBENCH_METRICS"] = "1"
        METRICS = True
        sys.argv[1] = "drain"
    if sys.argv[1] in ("drain_pgbouncer", "enqueue_concurrent_pgbouncer"):
        os.environ["JQBENCH_PGBOUNCER"] = "1"  # inherited by the drain's workers
        POOLER = os.environ["JQBENCH_POOLER_DSN"]
        sys.argv[1] = sys.argv[1].removesuffix("_pgbouncer")
    if sys.argv[1:2] == ["workflow_release"]:
        harness.emit(workflows.main(sys.argv[2:]))
        sys.exit(0)
    if sys.argv[1] in ("drain_workflow_fanout", "drain_workflow_chain"):
        WORKFLOW = sys.argv[1].removeprefix("drain_workflow_")
        sys.argv[1] = "drain"
    if sys.argv[1] in ("drain_50types", "drain_any_type"):
        os.environ["JQBENCH_TYPES"] = "50" if sys.argv[1] == "drain_50types" else "any"
        TYPES = os.environ["JQBENCH_TYPES"]
        sys.argv[1] = "drain"
    if sys.argv[1] in ("drain_tagged", "enqueue_concurrent_tagged"):
        os.environ["JQBENCH_TAGGED"] = "1"
        TAGS, META = ["bench", "customer:acme"], {"customer": "acme", "user_id": 42}
        sys.argv[1] = sys.argv[1].removesuffix("_tagged")
    if sys.argv[1:2] == ["drain_mixed"]:
        os.environ["JQBENCH_MIXED"] = "1"
        MIXED = True
        sys.argv[1] = "drain"
    if sys.argv[1:2] == ["raw_insert"]:
        args = harness.parse_args(["enqueue_single", *sys.argv[2:]])
        harness.emit(asyncio.run(raw_insert(args.dsn, args.n)))
        sys.exit(0)
    harness.main(JobqueueAdapter)
