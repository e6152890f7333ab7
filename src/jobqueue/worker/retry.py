"""When a failed attempt runs again."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FixedDelay:
    """The same wait after every failed attempt (``RETRY_DELAY_SECONDS``)."""

    seconds: float

    def delay(self, attempt: int) -> float:
        return self.seconds
