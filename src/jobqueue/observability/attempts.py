"""The seam between the executor and what observes its attempts.

The executor calls ``started`` in the attempt's own task just before the handler
runs, so whatever it puts in a context variable (a current span, a log capture) is
what the handler sees, sync handlers included (their thread runs in a copy of that
context). ``ended`` gets back what ``started`` returned, with the outcome. Both run
on the hot path, once per attempt, for every observer: they must not block and must
not raise (the executor logs and drops an observer's exception rather than lose the
job's outcome).
"""

from __future__ import annotations

from typing import Literal, Protocol

from jobqueue.db.records import ClaimedJob

# How an attempt ended, as the worker saw it:
# - completed: the handler returned;
# - retried: it raised, and the job will run again after a delay;
# - failed: it raised on its last attempt;
# - discarded: it raised Discard, or its payload or result can never be accepted;
# - cancelled: the job was cancelled while it ran;
# - released: shutdown stopped it; it goes back to pending, the attempt not counted.
# - snoozed: it raised Snooze: due again later, the attempt not counted.
# - waiting: it called ctx.sleep: the job waits, holding no slot, the attempt not counted.
# (A job whose worker died is "rescued" by the leader, which sees no attempt end.)
Outcome = Literal[
    "completed", "retried", "failed", "discarded", "cancelled", "released", "snoozed", "waiting"
]


class AttemptObserver(Protocol):
    def started(self, job: ClaimedJob) -> object:
        """The attempt begins; returns what ``ended`` is handed back."""
        ...

    def ended(
        self,
        job: ClaimedJob,
        state: object,
        outcome: Outcome,
        seconds: float,
        error: BaseException | None,
    ) -> None:
        """The attempt ended after ``seconds`` of handler time, with ``error`` if it raised."""
        ...
