"""Search at a million stored jobs (docs/search.md#figures): how long a page of GET
/jobs takes with a tag filter, a metadata filter and a bounded payload filter.

    python bench/search.py [--jobs 1000000] [--queries 200] [--json]

On DATABASE_URL, or the embedded server, in a schema of its own. The jobs are made
in the database (INSERT ... SELECT), then VACUUM ANALYZE; then each search asks for
the newest page of 50 through ``JobQueue.inspect.jobs``, the call behind GET /jobs,
the dashboard and ``jobqueue jobs list``, ``--queries`` times with the value changed
each time (another customer, another user), and reports p50 and p99 in ms.

The jobs, by ``g`` from 1 to N:

- 90% completed, 5% pending, 3% failed, 2% cancelled, spread evenly (finished jobs
  are most of a table kept for a while);
- half carry tags: ``import`` (one job in 10 of all), ``nightly`` (one in 20), and
  ``vip`` on one in 1,000; the other half carry none (NULL, not indexed);
- two in three carry metadata ``{"customer": "c<g % 1000>", "user_id": g % 100000}``:
  about 670 jobs per customer at a million;
- every payload is ``{"user_id": g % 100000, "file": "f<g>.csv"}``.

Nothing here asserts a time: it prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import asyncpg

sys.path.insert(0, os.path.dirname(__file__))
from run import database_url

from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.db.migrate import migrate
from jobqueue.model.job import JobStatus
from jobqueue.model.search import JobFilter

SCHEMA = "jqbench_search"
FILL_BATCH = 100_000

# Each search: a name, and the filter of its i-th run.
SEARCHES: list[tuple[str, Callable[[int], JobFilter]]] = [
    ("tag_common", lambda i: JobFilter(tags=["import"])),
    ("tag_rare", lambda i: JobFilter(tags=["vip"])),
    ("tag_absent", lambda i: JobFilter(tags=[f"absent-{i}"])),  # no job carries it
    ("tag_two", lambda i: JobFilter(tags=["import", "nightly"])),
    ("tag_and_status_failed", lambda i: JobFilter(status=JobStatus.FAILED, tags=["import"])),
    ("meta_customer", lambda i: JobFilter(meta={"customer": f"c{i * 7 % 1000}"})),
    ("meta_user", lambda i: JobFilter(meta={"user_id": i * 7919 % 100_000})),
    ("meta_and_tag", lambda i: JobFilter(tags=["import"], meta={"customer": f"c{i * 10 % 1000}"})),
    ("payload_user", lambda i: JobFilter(payload={"user_id": i * 7919 % 100_000})),
    ("payload_pending", lambda i: JobFilter(status=JobStatus.PENDING,
                                            payload={"user_id": i * 7919 % 100_000})),
    ("no_filter", lambda i: JobFilter()),
]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench/search.py", description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    dsn, server = database_url()
    try:
        figures = asyncio.run(measure(dsn, args.jobs, args.queries))
    finally:
        if server is not None:
            server.stop()
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:<34} {value}")
    return 0


async def measure(dsn: str, jobs: int, queries: int) -> dict[str, Any]:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        await migrate(conn, SCHEMA)
        fill_seconds = await fill(conn, jobs)
        size = await conn.fetchval(f"SELECT pg_total_relation_size('{SCHEMA}.jobs')")
    finally:
        await conn.close()
    figures: dict[str, Any] = {"jobs": jobs, "fill_seconds": round(fill_seconds, 1),
                               "table_mb": round(size / 2**20)}  # fmt: skip
    jq = JobQueue(settings=Settings(database_url=dsn, schema=SCHEMA, log_level="warning"))
    try:
        for name, where in SEARCHES:
            times, found, truncated = await timed(jq, where, queries)
            figures[f"{name}_p50_ms"] = round(statistics.median(times), 2)
            figures[f"{name}_p99_ms"] = round(percentile(times, 0.99), 2)
            figures[f"{name}_found_median"] = statistics.median(found)
            if truncated:
                figures[f"{name}_truncated"] = f"{truncated}/{queries}"
    finally:
        await jq.close()
        conn = await asyncpg.connect(dsn)
        await conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        await conn.close()
    return figures


async def fill(conn: asyncpg.Connection, jobs: int) -> float:
    started = time.monotonic()
    for start in range(1, jobs + 1, FILL_BATCH):
        await conn.execute(
            f"""WITH job AS (
                INSERT INTO {SCHEMA}.jobs (type, status, payload, tags, meta, attempts,
                                           started_at, finished_at)
                SELECT 'import_rows',
                       CASE WHEN h < 90 THEN 'completed' WHEN h < 95 THEN 'pending'
                            WHEN h < 98 THEN 'failed' ELSE 'cancelled' END,
                       jsonb_build_object('user_id', g % 100000, 'file', 'f' || g || '.csv'),
                       CASE WHEN g % 2 = 1 THEN NULL
                            ELSE array_remove(ARRAY[
                                CASE WHEN g % 10 = 0 THEN 'import' END,
                                CASE WHEN g % 20 = 0 THEN 'nightly' END,
                                CASE WHEN g % 1000 = 0 THEN 'vip' END,
                                'batch-' || (g % 50)], NULL) END,
                       CASE WHEN g % 3 = 0 THEN NULL
                            ELSE jsonb_build_object('customer', 'c' || (g % 1000),
                                                    'user_id', g % 100000) END,
                       CASE WHEN h BETWEEN 90 AND 94 THEN 0 ELSE 1 END,
                       CASE WHEN h BETWEEN 90 AND 94 THEN NULL ELSE now() END,
                       CASE WHEN h BETWEEN 90 AND 94 THEN NULL ELSE now() END
                FROM generate_series($1::bigint, $2::bigint) AS g,
                     LATERAL (SELECT abs(hashint4(g::int) % 100) AS h) AS spread
                RETURNING id, tags, meta
            )  -- the search's copy, as the enqueue statements write it (migration 0031)
            INSERT INTO {SCHEMA}.job_labels (job_id, tags, meta)
            SELECT id, tags, meta FROM job WHERE tags IS NOT NULL OR meta IS NOT NULL""",
            start,
            min(start + FILL_BATCH - 1, jobs),
        )  # fmt: skip
    # What autovacuum does after a fill: without statistics the planner guesses.
    await conn.execute(f"VACUUM ANALYZE {SCHEMA}.jobs, {SCHEMA}.job_labels")
    return time.monotonic() - started


async def timed(
    jq: JobQueue, where: Callable[[int], JobFilter], queries: int
) -> tuple[list[float], list[int], int]:
    times: list[float] = []
    found: list[int] = []
    truncated = 0
    for i in range(queries):
        started = time.perf_counter()
        page = await jq.inspect.jobs(where(i), limit=50)
        times.append((time.perf_counter() - started) * 1000)
        found.append(len(page.jobs))
        truncated += page.truncated
    return times, found, truncated


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


if __name__ == "__main__":
    sys.exit(main())
