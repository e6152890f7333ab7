"""Large maintenance writes in small statements, so that none holds its locks for long."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


async def in_batches(
    run: Callable[[int], Awaitable[int]],
    *,
    size: int,
    max_batches: int,
    pause: float = 0.0,
) -> int:
    """Call ``run(size)`` (an UPDATE or DELETE of at most ``size`` rows that returns how
    many it touched) until a call touches fewer, or ``max_batches`` ran; ``pause``
    seconds between calls. Returns the rows touched."""
    total = 0
    for _ in range(max_batches):
        n = await run(size)
        total += n
        if n < size:
            break
        if pause:
            await asyncio.sleep(pause)
    return total
