"""POST /orders stores the order and enqueues its receipt in one transaction, on the
app's own connection: the job exists exactly when the order does.

    uvicorn examples.fastapi_app.app:app
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import datetime

import asyncpg
from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel, Field

from .tasks import Receipt, jq, send_receipt

# The app's own tables, next to jobqueue's (in its schema) in the same database.
SCHEMA = """
CREATE TABLE IF NOT EXISTS products (sku text PRIMARY KEY, stock int NOT NULL);
INSERT INTO products VALUES ('book', 3) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS orders (
    id bigserial PRIMARY KEY,
    email text NOT NULL,
    sku text NOT NULL,
    quantity int NOT NULL,
    receipt_sent_at timestamptz
);
"""


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    await jq.migrate()  # jobqueue's tables; a no-op once applied
    async with asyncpg.create_pool(jq.dsn) as pool:
        await pool.execute(SCHEMA)
        app.state.pool = pool
        yield
    await jq.close()


app = FastAPI(lifespan=lifespan)


class NewOrder(BaseModel):
    email: str
    sku: str
    quantity: int = Field(gt=0)


class Order(NewOrder):
    id: int
    receipt_sent_at: datetime | None


@app.post("/orders", status_code=201)
async def place_order(new: NewOrder, request: Request) -> Order:
    async with request.app.state.pool.acquire() as conn, conn.transaction():
        order = await conn.fetchrow(
            "INSERT INTO orders (email, sku, quantity) VALUES ($1, $2, $3) RETURNING *",
            new.email,
            new.sku,
            new.quantity,
        )
        # On the request's connection, inside its transaction: committed with the order.
        await send_receipt.enqueue_async(Receipt(order_id=order["id"]), conn=conn)
        left = await conn.fetchval(
            "UPDATE products SET stock = stock - $2 WHERE sku = $1 AND stock >= $2 RETURNING stock",
            new.sku,
            new.quantity,
        )
        if left is None:  # raised inside the transaction: no order, no job
            raise HTTPException(409, f"not enough {new.sku!r} in stock")
    return Order(**order)


@app.get("/orders/{order_id}")
async def get_order(order_id: int, request: Request) -> Order:
    order = await request.app.state.pool.fetchrow("SELECT * FROM orders WHERE id = $1", order_id)
    if order is None:
        raise HTTPException(404, f"order {order_id} not found")
    return Order(**order)
