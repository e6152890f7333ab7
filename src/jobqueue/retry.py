"""When a failed attempt runs again: retry policies, and what a handler raises to decide.

A policy is any callable ``(attempt) -> seconds``, given per task:

    @jq.task("sync_crm", retry=FixedDelay(30))
    @jq.task("poll_feed", retry=lambda attempt: 5 * attempt)

Without one, ``ExponentialBackoff(RETRY_DELAY_SECONDS, JOBQUEUE_RETRY_MAX_DELAY)``
applies. A handler may also decide for itself, by raising ``RetryAt`` (run again
at a given time), ``Discard`` (fail now, with no further attempt) or ``Snooze`` (run
again later, the attempt not counted).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

RetryPolicy = Callable[[int], float]
# The longest snooze: a year. A job that must wait longer is a job to enqueue later.
MAX_SNOOZE_SECONDS = 365 * 86400.0


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


class Snooze(Exception):
    """Raised by a handler that cannot run yet (a partner's API is down, a file is not
    there yet): run the job again after ``seconds``, or at ``at`` (an aware datetime),
    without spending an attempt. The snooze is kept in the job's history; a job
    snoozed JOBQUEUE_MAX_SNOOZES times fails instead (docs/lifecycle.md#snooze)."""

    def __init__(self, seconds: float | None = None, *, at: datetime | None = None) -> None:
        if (at is None) == (seconds is None):
            raise ValueError("Snooze takes exactly one of seconds and at=")
        if at is not None and at.tzinfo is None:
            raise ValueError("Snooze(at=...) needs a datetime with a time zone")
        if seconds is not None and not 0 <= seconds <= MAX_SNOOZE_SECONDS:
            raise ValueError(f"Snooze: seconds must be within 0 and {MAX_SNOOZE_SECONDS:g}")
        super().__init__(f"snoozed for {seconds}s" if at is None else f"snoozed until {at}")
        self.at = at
        self.seconds = seconds

    def delay(self) -> float:
        if self.at is not None:
            return min(MAX_SNOOZE_SECONDS, max(0.0, (self.at - datetime.now(UTC)).total_seconds()))
        return self.seconds or 0.0


class Discard(Exception):
    """Raised by a handler: fail the job now, with no further attempt (for an input
    that can never succeed). It ends ``failed``, a dead letter with this reason."""
