"""Test signals (jobqueue.checkpoints), which the suite waits on instead of sleeping: off
until armed, then every value fired kept in order until a test takes it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from jobqueue.checkpoints import Signal, Signals

pytestmark = pytest.mark.anyio


async def test_an_armed_signal_keeps_every_value_in_order_until_taken() -> None:
    signal: Signal[int] = Signal()
    signal.fire(0)  # not armed: nothing is kept
    signal.arm()
    for n in (1, 2, 3, 4):
        signal.fire(n)
    assert await signal.wait() == 1
    assert await signal.times(2) == [2, 3]
    signal.clear()  # 4 is forgotten
    signal.fire(5)
    signal.fire(6)
    assert await signal.wait_for(lambda n: n > 5) == 6


async def test_waiting_on_an_unarmed_signal_or_past_the_timeout_raises() -> None:
    signal: Signal[None] = Signal()
    with pytest.raises(RuntimeError, match="not armed"):
        await signal.wait()
    signal.arm()
    with pytest.raises(TimeoutError):
        await signal.wait(timeout=0.01)


def test_a_services_signals_are_armed_together() -> None:
    @dataclass
    class Service(Signals):
        started: Signal[int] = field(default_factory=Signal)
        stopped: Signal[None] = field(default_factory=Signal)

    signals = Service()
    assert (signals.started.armed, signals.stopped.armed) == (False, False)
    signals.arm()
    assert (signals.started.armed, signals.stopped.armed) == (True, True)
