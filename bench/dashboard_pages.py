"""The dashboard's server time per page with a million jobs in the table (medians).

    python bench/dashboard_pages.py                       # 1,000,000 jobs, 25 requests a page
    python bench/dashboard_pages.py --jobs 100000 --json  # smaller, as JSON

Fills a schema of its own (`bench_ui`, dropped first) with JOBS jobs over three
queues and five types (90% completed, 5% failed, 1% cancelled, 3% pending, 1%
running), a day of per-minute series and a worker row, then times each page through
the ASGI application in this process: the time from request to the last byte of the
answer, with no network in between. It is not a test: nothing here asserts a time.
DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/postgres) says where.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time

import asyncpg
import httpx
from fastapi import FastAPI

from jobqueue import ui
from jobqueue.app import JobQueue
from jobqueue.config import Settings
from jobqueue.db.migrate import migrate

SCHEMA = "bench_ui"

FILL = """
INSERT INTO "{schema}".jobs (type, queue, payload, status, attempts, max_attempts, run_at,
                             created_at, updated_at, started_at, finished_at, last_error)
SELECT 'type' || (i % 5), (ARRAY['default', 'mail', 'reports'])[1 + i % 3],
       jsonb_build_object('n', i),
       s, CASE WHEN s = 'pending' THEN 0 ELSE 1 END, 3, t, t, t,
       CASE WHEN s = 'pending' THEN NULL ELSE t + interval '50 ms' END,
       CASE WHEN s IN ('completed', 'failed', 'cancelled') THEN t + interval '80 ms' END,
       CASE WHEN s = 'failed' THEN 'RuntimeError: boom' END
FROM (
    SELECT i,
           CASE WHEN i % 100 < 90 THEN 'completed' WHEN i % 100 < 95 THEN 'failed'
                WHEN i % 100 < 96 THEN 'cancelled' WHEN i % 100 < 99 THEN 'pending'
                ELSE 'running' END AS s,
           now() - make_interval(secs => ($2 - i) * 0.05) AS t
    FROM generate_series($1::bigint, $1 + $3 - 1) AS i
) AS g
"""

SERIES = """
INSERT INTO "{schema}".queue_minutes
SELECT m, q, 500 + (extract(minute FROM m))::int, 3, 0.02, 0.4
FROM generate_series(date_trunc('minute', now()) - interval '1 day',
                     date_trunc('minute', now()) - interval '1 minute', interval '1 minute') AS m,
     unnest(ARRAY['default', 'mail', 'reports']) AS q
"""

PAGES = [
    ("overview", "/ui/"),
    ("overview, last day", "/ui/?chart=day"),
    ("jobs", "/ui/jobs"),
    ("jobs, failed", "/ui/jobs?status=failed"),
    ("jobs, pending in mail", "/ui/jobs?status=pending&queue=mail"),
    ("jobs, one type", "/ui/jobs?type=type3"),
    ("jobs, page 10,000", "/ui/jobs?after={middle}"),
    ("job", "/ui/jobs/{middle}"),
    ("workers", "/ui/workers"),
    ("cron", "/ui/cron"),
    ("retry all: confirm (counters)", "/ui/jobs/bulk?action=retry"),
    ("retry all of a type: confirm (bounded)", "/ui/jobs/bulk?action=retry&type=type3"),
]


async def fill(dsn: str, jobs: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
        await migrate(conn, SCHEMA)
        step = 100_000
        for start in range(0, jobs, step):
            await conn.execute(FILL.format(schema=SCHEMA), start, jobs, min(step, jobs - start))
        await conn.execute(SERIES.format(schema=SCHEMA))
        await conn.execute(
            f"""INSERT INTO "{SCHEMA}".workers (id, host, pid, queues, slots)
                VALUES ('bench:1:0', 'bench', 1, ARRAY['default', 'mail', 'reports'], 10)"""
        )
        await conn.execute(f'VACUUM ANALYZE "{SCHEMA}".jobs')
    finally:
        await conn.close()


async def measure(dsn: str, requests: int) -> list[dict[str, object]]:
    jq = JobQueue(settings=Settings(database_url=dsn, schema=SCHEMA))
    async with jq:
        store = await jq.store()
        while await store.queue_counts_fold(limit=1000):  # what the leader does
            pass
        middle = (await (await jq.pool()).fetchval(f'SELECT max(id) FROM "{SCHEMA}".jobs')) // 2
        app = FastAPI()
        app.mount("/ui", ui.app(jq, open_without_tokens=True))
        transport = httpx.ASGITransport(app=app)
        results = []
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            for name, template in PAGES:
                path = template.format(middle=middle)
                times = []
                for _ in range(requests + 2):  # two warm-ups, not counted
                    began = time.perf_counter()
                    answer = await client.get(path)
                    times.append((time.perf_counter() - began) * 1000)
                    assert answer.status_code == 200, (path, answer.status_code, answer.text)
                times = times[2:]
                results.append(
                    {
                        "page": name,
                        "path": path,
                        "median_ms": round(statistics.median(times), 1),
                        "max_ms": round(max(times), 1),
                    }
                )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=25)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the schema afterwards")
    args = parser.parse_args()
    dsn = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    began = time.perf_counter()
    asyncio.run(fill(dsn, args.jobs))
    filled = time.perf_counter() - began
    results = asyncio.run(measure(dsn, args.requests))
    if not args.keep:
        asyncio.run(drop(dsn))
    if args.json:
        print(json.dumps({"jobs": args.jobs, "pages": results}, indent=2))
        return
    print(f"{args.jobs:,} jobs (filled in {filled:.0f} s); {args.requests} requests a page")
    print(f"| {'Page':<40} | {'median ms':>9} | {'max ms':>7} |")
    print(f"|{'-' * 42}|{'-' * 11}:|{'-' * 8}:|")
    for r in results:
        print(f"| {r['page']:<40} | {r['median_ms']:>9} | {r['max_ms']:>7} |")


async def drop(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
    finally:
        await conn.close()


if __name__ == "__main__":
    main()
