"""`result_roundtrip_floor`: what PostgreSQL alone makes of `result_roundtrip`'s trip,
run by bench/jobqueue_runner.py.

The same trip with no jobqueue code but the statements: an enqueuer inserts a job with
enqueue.sql (a commit that waits for the disk, and the insert trigger's NOTIFY on the
new-jobs channel); a worker process, waiting on LISTEN, claims it with claim.sql and
completes it with complete.sql at once, with its result (a second durable commit, and
the done channel's NOTIFY); the enqueuer, listening on the done channel since before
the insert, reads the job with get_job.sql when its id is announced. jobqueue's own
table, indexes, triggers and prepared statements, on plain asyncpg connections, with
the pool's session settings: two processes, two durable commits, four round trips and
two notifications, as `result_roundtrip` has. What `jq.enqueue`, the worker and
`jq.wait` add to it is `result_roundtrip` against this, in the same round
(`result_roundtrip_floor_ratio`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import asyncpg
import harness

from jobqueue.db.pool import SESSION_SETTINGS
from jobqueue.db.sql import queries

WORKER = "floor"
LEASE_SECONDS = 30.0
CLAIM_BATCH = 500  # the worker's claim batch, as sql_floor claims


async def trips(dsn: str, schema: str, n: int, interval_ms: float) -> dict[str, Any]:
    """``n`` trips ``interval_ms`` apart, after one untimed trip that warms every
    statement; the worker is a process of its own, as `result_roundtrip`'s is."""
    q = queries(schema)
    worker = await asyncio.create_subprocess_exec(
        sys.executable, __file__, dsn, schema, str(os.getpid()), stdout=asyncio.subprocess.PIPE
    )
    conn = await asyncpg.connect(dsn, server_settings=dict(SESSION_SETTINGS))
    listener = await asyncpg.connect(dsn)
    # An id can be announced before the insert's answer is read (the worker was
    # quicker than this process's wake-up): each announcement is kept until its trip
    # looks for it.
    announced: dict[int, asyncio.Future[None]] = {}
    loop = asyncio.get_running_loop()

    def on_done(_conn: object, _pid: int, _channel: str, payload: str) -> None:
        for text in payload.split(","):
            done = announced.setdefault(int(text), loop.create_future())
            if not done.done():
                done.set_result(None)

    try:
        assert worker.stdout is not None
        await worker.stdout.readline()  # the worker is listening
        await listener.add_listener(q.done_channel, on_done)
        enqueue, get_job = await conn.prepare(q.enqueue), await conn.prepare(q.get_job)
        times: list[float] = []
        schedule = time.monotonic()
        for seq in range(-1, n):
            delay = schedule + (seq + 1) * interval_ms / 1000 - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            sent = time.monotonic()
            job_id = await enqueue.fetchval(
                "bench_result", "default", json.dumps({"seq": seq}), 0, 3, *[None] * 7
            )
            await announced.setdefault(job_id, loop.create_future())
            row = await get_job.fetchrow(job_id)
            del announced[job_id]
            if row["status"] != "completed" or json.loads(row["result"]) != {"seq": seq}:
                raise RuntimeError(f"result_roundtrip_floor: job {job_id} ended {row['status']}")
            if seq >= 0:
                times.append((time.monotonic() - sent) * 1000.0)
    finally:
        worker.kill()
        await worker.wait()
        await listener.close()
        await conn.close()
    return {**harness.spread(times), "jobs": n}


async def work(dsn: str, schema: str) -> None:
    """Claim and complete every job announced, each with its payload as its result, until
    killed."""
    q = queries(schema)
    conn = await asyncpg.connect(dsn, server_settings=dict(SESSION_SETTINGS))
    listener = await asyncpg.connect(dsn)
    woken = asyncio.Event()
    await listener.add_listener(q.channel, lambda *_: woken.set())
    claim, complete = await conn.prepare(q.claim), await conn.prepare(q.complete)
    print("listening", flush=True)
    while True:
        await woken.wait()
        woken.clear()
        while rows := await claim.fetch("default", CLAIM_BATCH, WORKER, LEASE_SECONDS, *[None] * 5):
            ids = [r["id"] for r in rows]
            held = json.dumps({str(r["id"]): r["claim_token"] for r in rows})
            results = json.dumps({str(r["id"]): json.loads(r["payload"]) for r in rows})
            await complete.fetch(ids, held, WORKER, "completed", None, results, None)


if __name__ == "__main__":
    harness._die_with_parent(int(sys.argv[3]))  # a runner killed takes its worker along
    asyncio.run(work(sys.argv[1], sys.argv[2]))
