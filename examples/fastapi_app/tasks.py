"""The app's jobs: what the worker runs (`jobqueue worker --app examples.fastapi_app.tasks:jq`)."""

from __future__ import annotations

from typing import Any

import asyncpg

from jobqueue import JobQueue

jq = JobQueue()  # DATABASE_URL and JOBQUEUE_SCHEMA from the environment


@jq.task("send_receipt", max_attempts=5)
async def send_receipt(payload: dict[str, Any]) -> None:
    """Send the order's receipt (here: print it), then note that it was sent."""
    conn = await asyncpg.connect(jq.dsn)  # the app's own tables live in the queue's database
    try:
        order = await conn.fetchrow(
            "SELECT id, email FROM orders WHERE id = $1", payload["order_id"]
        )
        print(f"Receipt for order {order['id']} sent to {order['email']}", flush=True)
        await conn.execute("UPDATE orders SET receipt_sent_at = now() WHERE id = $1", order["id"])
    finally:
        await conn.close()
