"""Retry policies and a handler's RetryAt, on their own."""

from __future__ import annotations

from datetime import datetime

import pytest

from jobqueue import ExponentialBackoff, FixedDelay, RetryAt


def test_exponential_backoff_doubles_within_its_jitter_up_to_the_cap() -> None:
    policy = ExponentialBackoff(base=10, cap=100, jitter=0.1)
    for attempt, expected in [(1, 10), (2, 20), (3, 40), (4, 80), (5, 100), (50, 100)]:
        delays = [policy(attempt) for _ in range(200)]
        assert all(expected * 0.9 <= d <= expected * 1.1 for d in delays), (attempt, delays)
        assert len(set(delays)) > 1  # jittered, so jobs that failed together spread out
    assert FixedDelay(7)(1) == FixedDelay(7)(9) == 7
    assert ExponentialBackoff(jitter=0)(1000) == 3600  # no overflow on a huge attempt


def test_retry_at_needs_exactly_one_time() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        RetryAt()
    with pytest.raises(ValueError, match="time zone"):
        RetryAt(at=datetime(2030, 1, 1))
