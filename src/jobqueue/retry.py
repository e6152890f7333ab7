"""When a failed attempt runs again: retry policies, and what a handler raises to decide.

A policy is any callable ``(attempt) -> seconds``, given per task:

    @jq.task("sync_crm", retry=FixedDelay(30))
    @jq.task("poll_feed", retry=lambda attempt: 5 * attempt)

Without one, ``ExponentialBackoff(RETRY_DELAY_SECONDS, JOBQUEUE_RETRY_MAX_DELAY)``
applies. A handler may also decide for itself, by raising ``RetryAt`` (run again
at a given time) or ``Discard`` (fail now, with no further attempt).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

RetryPolicy = Callable[[int], float]


@dataclass(frozen=True)
class ExponentialBackoff:
    """``base * 2^(attempt - 1)`` seconds, at most ``cap``, then ±``jitter`` of it at random.

    The jitter spreads the retries of jobs that failed together (a dependency went
    down), so that they do not all hit it again in the same second.
    """

    base: float = 10.0
    cap: float = 3600.0
    jitter: float = 0.1

    def __call__(self, attempt: int) -> float:
        delay = min(self.cap, self.base * 2.0 ** min(attempt - 1, 1000))
        return delay * (1.0 + random.uniform(-self.jitter, self.jitter))


@dataclass(frozen=True)
class FixedDelay:
    """The same wait after every failed attempt."""

    seconds: float

    def __call__(self, attempt: int) -> float:
        return self.seconds


class RetryAt(Exception):
    """Raised by a handler: this attempt failed; run the job again at ``at`` (an aware
    datetime) or after ``delay_seconds``, instead of when the policy says. The attempt
    counts: with none left, the job fails."""

    def __init__(
        self, reason: str = "", *, at: datetime | None = None, delay_seconds: float | None = None
    ) -> None:
        if (at is None) == (delay_seconds is None):
            raise ValueError("RetryAt takes exactly one of at= and delay_seconds=")
        if at is not None and at.tzinfo is None:
            raise ValueError("RetryAt(at=...) needs a datetime with a time zone")
        super().__init__(reason or "retry requested by the handler")
        self.at = at
        self.delay_seconds = delay_seconds

    def delay(self) -> float:
        if self.at is not None:
            return max(0.0, (self.at - datetime.now(UTC)).total_seconds())
        return max(0.0, self.delay_seconds or 0.0)


class Discard(Exception):
    """Raised by a handler: fail the job now, with no further attempt (for an input
    that can never succeed). It ends ``failed``, a dead letter with this reason."""
