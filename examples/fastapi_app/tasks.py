"""The app's jobs: what the worker runs (`jobqueue worker --app examples.fastapi_app.tasks:jq`)."""

from __future__ import annotations

import asyncpg
from pydantic import BaseModel

from jobqueue import JobContext, JobQueue

jq = JobQueue()  # DATABASE_URL and JOBQUEUE_SCHEMA from the environment


class Receipt(BaseModel):
    """The job's payload: checked when enqueued (and over HTTP), given to the handler."""

    order_id: int


@jq.task("send_receipt", max_attempts=5)
async def send_receipt(receipt: Receipt, ctx: JobContext) -> dict[str, str]:
    """Send the order's receipt (here: print it), note that it was sent, and return the
    address as the job's result."""
    conn = await asyncpg.connect(jq.dsn)  # the app's own tables live in the queue's database
    try:
        order = await conn.fetchrow("SELECT id, email FROM orders WHERE id = $1", receipt.order_id)
        ctx.log.info("sending receipt", email=order["email"])
        print(f"Receipt for order {order['id']} sent to {order['email']}", flush=True)
        await conn.execute("UPDATE orders SET receipt_sent_at = now() WHERE id = $1", order["id"])
    finally:
        await conn.close()
    return {"sent_to": order["email"]}
