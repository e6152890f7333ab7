"""`enqueue_http_floor`: the least a `POST /jobs` can cost on the server the API uses.

A bare Starlette app, with none of jobqueue's API around it (no validation beyond
reading the JSON, no tokens, no metrics, no error handling of its own), served by the
same HTTP server as `jobqueue api` (jobqueue.api.http.HttpServer, on a socket made as
the API's is) on the same event loop (jobqueue.server.event_loop). Each request stores
the row `jobqueue api` stores for the bench's `{"type": "noop", "payload": {}}`,
through the store's own enqueue query (db/queries/enqueue.sql) on a pool made as the
API's is (its size and session settings), one statement and one commit per request:
asyncpg prepares it once per connection, as it does for the store. The answer is the
stored row as JSON, 201, with `Location`, as the API answers.

bench/run.py runs it beside `enqueue_http`, with the same client, on DATABASE_URL and
PORT; the ratio of the two is what jobqueue's API costs above the floor.

With `--shared`, the rows go through jobqueue's Enqueuer instead, as `jobqueue api`'s
do: concurrent requests share one INSERT and one commit (the enqueue query for one
row, enqueue_rows for more), and the answer is the Job as the API serialises it. What
`enqueue_http` costs above that is its HTTP layer alone: routing, middleware, parsing
and validation, tokens, metrics.

    DATABASE_URL=postgresql://... PORT=5002 python bench/http_floor.py [--shared]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal

import asyncpg
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from jobqueue import logs
from jobqueue.api.http import HttpServer
from jobqueue.config import load
from jobqueue.database import POOL_SIZE
from jobqueue.db.migrate import migrate
from jobqueue.db.pool import create_pool
from jobqueue.db.records import JobRow
from jobqueue.db.sql import queries
from jobqueue.db.store import Store
from jobqueue.encoding import to_json
from jobqueue.enqueue.enqueuer import Enqueuer
from jobqueue.server import Roles, event_loop, listen_socket


def floor_app(pool: asyncpg.Pool, schema: str, max_attempts: int, shared: bool) -> Starlette:
    enqueue_sql = queries(schema).enqueue
    enqueuer = Enqueuer(Store(pool, schema))

    async def enqueue(request: Request) -> Response:
        new = await request.json()
        queue, payload = new.get("queue") or "default", json.dumps(new.get("payload", {}))
        if shared:
            job = await enqueuer.insert(
                JobRow(new["type"], queue, 0, max_attempts, None, None, payload)
            )
            body, id = to_json(job), job.id
        else:
            async with pool.acquire() as conn:
                row = await conn.fetchrow(
                    enqueue_sql, new["type"], queue, payload, 0, max_attempts,
                    None, None, None, None, None, None, None,  # ... tags, meta: none
                )  # fmt: skip
            body = json.dumps(dict(row), default=str, separators=(",", ":")).encode()
            id = row["id"]
        return Response(body, 201, {"Location": f"/jobs/{id}"}, "application/json")

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[Route("/jobs", enqueue, methods=["POST"]), Route("/healthz", healthz)])


async def main(shared: bool) -> None:
    settings = load()
    logs.configure(settings.log_level)
    dsn = os.environ["DATABASE_URL"]
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn, settings.schema)
    finally:
        await conn.close()
    pool = await create_pool(
        dsn, max_size=settings.pool_size or POOL_SIZE, statement_timeout=settings.statement_timeout
    )
    server = HttpServer(
        floor_app(pool, settings.schema, settings.max_attempts, shared), grace_seconds=1, tls=None
    )
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: setattr(server, "should_exit", True))
    sock = listen_socket("127.0.0.1", settings.port)
    try:
        await server.serve(sockets=[sock])
    finally:
        await pool.close()
        sock.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", action="store_true", help="store through the Enqueuer")
    shared = parser.parse_args().shared
    with asyncio.Runner(loop_factory=event_loop(Roles(api=True, worker=False))) as runner:
        runner.run(main(shared))
