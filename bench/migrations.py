"""Each migration at a million jobs (docs/migrations.md): how long it takes, and the
longest an enqueue waited while it ran.

A schema at migration 1 is filled with ``--jobs`` jobs (90% completed, the rest
pending), then each migration is applied in turn, as `jobqueue migrate` applies it (its
own transaction, under the lock timeout), while another connection enqueues one job
every 5 ms and times each INSERT. When the attempts table appears (migration 3) a
failed attempt is added for a tenth of the jobs, and when the job logs do (12), a log
line for a hundredth. The longest INSERT is the longest any enqueue was held up by the
migration's locks (an INSERT alone takes well under a millisecond).

    python bench/migrations.py                # 1,000,000 jobs; DATABASE_URL or embedded
    python bench/migrations.py --jobs 100000  # quicker
    python bench/migrations.py --json

Prints a table (or JSON): version, name, seconds, longest enqueue wait in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from jobqueue.db.embedded import EmbeddedPostgres
from jobqueue.db.migrate import migrate
from jobqueue.db.sql import Migration, migrations

PROBE_EVERY = 0.005


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    dsn, embedded = await database()
    schema = f"bench_migrations_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(dsn)
    try:
        rows = await measure(conn, dsn, schema, args.jobs)
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()
        if embedded is not None:
            embedded.stop()
    if args.json:
        print(json.dumps({"jobs": args.jobs, "migrations": rows}, indent=2))
    else:
        print(f"{'':4} {'migration':32} {'seconds':>8} {'longest enqueue wait ms':>24}")
        for row in rows:
            print(f"{row['version']:4d} {row['name']:32} {row['seconds']:8.2f} "
                  f"{row['longest_enqueue_wait_ms']:24.1f}")  # fmt: skip
    return 0


async def measure(
    conn: asyncpg.Connection, dsn: str, schema: str, jobs: int
) -> list[dict[str, object]]:
    found = migrations(schema)
    await migrate(conn, schema, found=found[:1])
    started = time.monotonic()
    await fill_jobs(conn, schema, jobs)
    print(f"[bench] {jobs:,} jobs stored in {time.monotonic() - started:.1f}s", file=sys.stderr)
    rows = []
    for migration in found[1:]:
        seconds, longest = await timed(conn, dsn, schema, migration)
        rows.append({"version": migration.version, "name": migration.name,
                     "seconds": round(seconds, 3),
                     "longest_enqueue_wait_ms": round(longest * 1000, 1)})  # fmt: skip
        print(f"[bench] {migration.version} {migration.name}: {seconds:.2f}s", file=sys.stderr)
        if migration.version == 3:
            await conn.execute(f"""
                INSERT INTO "{schema}".job_attempts (job_id, attempt, worker_id, error, started_at)
                SELECT id, 1, 'w', 'ValueError: bench', now() FROM "{schema}".jobs
                WHERE id % 10 = 0""")  # fmt: skip
        if migration.version == 12:
            await conn.execute(f"""
                INSERT INTO "{schema}".job_logs (job_id, attempt, started_at, worker_id, log)
                SELECT id, 1, now(), 'w', 'a line of the handler''s log' FROM "{schema}".jobs
                WHERE id % 100 = 0""")  # fmt: skip
        await conn.execute(f'VACUUM ANALYZE "{schema}".jobs')
    return rows


async def fill_jobs(conn: asyncpg.Connection, schema: str, jobs: int) -> None:
    await conn.execute(f"""
        INSERT INTO "{schema}".jobs (type, payload, status, attempts, finished_at)
        SELECT 'bench', jsonb_build_object('n', n),
               CASE WHEN n % 10 = 0 THEN 'pending' ELSE 'completed' END,
               CASE WHEN n % 10 = 0 THEN 0 ELSE 1 END,
               CASE WHEN n % 10 = 0 THEN NULL ELSE now() END
        FROM generate_series(1, {int(jobs)}) n""")  # fmt: skip
    await conn.execute(f'VACUUM ANALYZE "{schema}".jobs')


async def timed(
    conn: asyncpg.Connection, dsn: str, schema: str, migration: Migration
) -> tuple[float, float]:
    """The migration's time, and the longest probe INSERT while it ran."""
    probe = await asyncpg.connect(dsn)
    done = asyncio.Event()
    longest = 0.0

    async def enqueue() -> None:
        nonlocal longest
        while not done.is_set():
            started = time.monotonic()
            await probe.execute(f"INSERT INTO \"{schema}\".jobs (type) VALUES ('probe')")
            longest = max(longest, time.monotonic() - started)
            await asyncio.sleep(PROBE_EVERY)

    probing = asyncio.create_task(enqueue())
    await asyncio.sleep(0.05)
    started = time.monotonic()
    try:
        await migrate(conn, schema, found=[*migrations(schema)[: migration.version]])
        seconds = time.monotonic() - started
    finally:
        done.set()
        await probing
        await probe.close()
    return seconds, longest


async def database() -> tuple[str, EmbeddedPostgres | None]:
    """DATABASE_URL, or an embedded server of the bench's own."""
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"], None
    data = Path.home() / ".cache" / "jobqueue-bench" / "migrations-pg"
    server = EmbeddedPostgres(data)
    return server.start(), server


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
