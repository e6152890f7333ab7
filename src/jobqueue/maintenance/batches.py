"""Large maintenance writes in small statements, so that none holds its locks for long."""

from __future__ import annotations

import asyncio

import asyncpg


async def in_batches(
    pool: asyncpg.Pool,
    sql: str,
    *args: object,
    size: int,
    max_batches: int,
    pause: float = 0.0,
) -> int:
    """Run ``sql`` (an UPDATE or DELETE of at most ``size`` rows, its last parameter) until a
    run touches fewer rows, or ``max_batches`` ran; ``pause`` seconds between runs. Returns
    the rows touched."""
    total = 0
    for _ in range(max_batches):
        status = await pool.execute(sql, *args, size)
        n = int(status.split()[-1])  # "DELETE n", "UPDATE n"
        total += n
        if n < size:
            break
        if pause:
            await asyncio.sleep(pause)
    return total
