"""Checkpoints that services report at, so that tests wait on what happened instead of
sleeping for long enough.

Each service holds a few named signals (``worker.producer.signals.polled``). A
signal is off until a test arms it; firing an unarmed signal is one attribute check,
so production pays nothing for them. Once armed, every value fired is kept in order
until a test takes it with ``wait``: a checkpoint passed before the wait began is not
missed. This is River's ``testsignal`` for asyncio.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# Long enough for a loaded CI machine; a test that needs longer says so.
DEFAULT_TIMEOUT = 10.0


class Signal(Generic[T]):
    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: asyncio.Queue[T] | None = None

    @property
    def armed(self) -> bool:
        return self._values is not None

    def arm(self) -> None:
        """Start keeping the values fired (forgetting any kept before)."""
        self._values = asyncio.Queue()

    def fire(self, value: T) -> None:
        if self._values is not None:
            self._values.put_nowait(value)

    def clear(self) -> None:
        """Forget the values fired so far: the next ``wait`` sees only later ones."""
        if self._values is not None:
            while not self._values.empty():
                self._values.get_nowait()

    async def wait(self, timeout: float = DEFAULT_TIMEOUT) -> T:
        """The oldest value fired and not taken yet, waiting for one if need be.
        Raises TimeoutError after ``timeout`` seconds."""
        if self._values is None:
            raise RuntimeError("this signal is not armed: call arm() before the checkpoint")
        return await asyncio.wait_for(self._values.get(), timeout)

    async def wait_for(self, predicate: Callable[[T], bool], timeout: float = DEFAULT_TIMEOUT) -> T:
        """Take values until one satisfies ``predicate``, and return it."""
        async with asyncio.timeout(timeout):
            while True:
                value = await self.wait(timeout)
                if predicate(value):
                    return value

    async def times(self, n: int, timeout: float = DEFAULT_TIMEOUT) -> list[T]:
        """The next ``n`` values."""
        async with asyncio.timeout(timeout):
            return [await self.wait(timeout) for _ in range(n)]


class Signals:
    """Base of a service's signals: a dataclass whose fields are Signals."""

    def arm(self) -> None:
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            signal: Any = getattr(self, field.name)
            signal.arm()
