"""Signals from outside (docs/durable.md#signals).

``POST /signals`` and ``jq.signal`` keep a signal for a job whether or not it waits for
one yet, and wake it if it waits (signal_send.sql). ``ctx.wait_for_signal(name)`` is the
run's Nth wait for that name; it returns that name's Nth signal, sent within the wait's
time limit. The limit is set by the run that first reached the wait and recorded as the
step "signal-N", so that every replay agrees on it: a signal that came after it is not
seen, and the wait raises SignalTimeout in each run from then on. Until a signal or its
time comes, the job waits holding no worker's slot.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from jobqueue import results
from jobqueue.durable.steps import NOT_RECORDED, Suspended, after
from jobqueue.model import fields
from jobqueue.model.steps import SIGNAL

if TYPE_CHECKING:
    from jobqueue.audit import Actor
    from jobqueue.db.store import Store
    from jobqueue.durable.steps import DurableRun


class SignalTimeout(Exception):
    """No signal of the name came to the job within ``ctx.wait_for_signal``'s time
    limit."""

    def __init__(self, name: str, until: datetime) -> None:
        super().__init__(f"no signal {name!r} came by {until.isoformat()}")
        self.name = name
        self.until = until


class SignalRefused(LookupError):
    """A signal to a job that does not exist (``ended`` False) or has ended (True)."""

    def __init__(self, job_id: int, status: str | None) -> None:
        self.job_id = job_id
        self.status = status
        self.ended = status is not None
        what = f"has ended ({status})" if status is not None else "does not exist"
        super().__init__(f"job {job_id} {what}: the signal was not kept")


async def send(
    store: Store, job_id: int, name: str, payload: Any, max_bytes: int, by: Actor | None
) -> int:
    """Keep a signal for the job, waking it if it waits; the signal's id. Given who sends
    it (``by``), its audit row is written in the same transaction, refusals included.
    Raises SignalRefused, or ValueError for a name or payload that is not one (not JSON,
    or larger than ``max_bytes``)."""
    from jobqueue import audit  # not the worker's: only senders write the audit log

    check_name(name)
    try:
        text = results.encode(payload, max_bytes)
    except results.ResultError as exc:
        raise ValueError(f"payload: {exc}") from None
    async with store.transaction() as tx:
        signal_id, status = await tx.signal_send(job_id=job_id, name=name, payload=text)
        if by is not None:
            outcome = audit.OK if signal_id is not None else audit.NOT_FOUND
            if signal_id is None and status is not None:
                outcome = audit.conflict(status)
            await audit.record_as(
                tx, by, audit.Action.JOB_SIGNAL, target=job_id, filter={"name": name},
                result=outcome,
            )  # fmt: skip
    if signal_id is None:
        raise SignalRefused(job_id, status)
    return signal_id


async def wait_for_signal(run: DurableRun, name: str, timeout: float | None) -> Any:
    """``ctx.wait_for_signal``: the signal's payload; SignalTimeout once its time limit
    has passed; until then Suspended ends the run, the job waiting."""
    check_name(name)
    # Checked on every run, the first included; a replay keeps the first run's time.
    until = None if timeout is None else after(timeout, "timeout")
    run.signals += 1
    run.signal_names[name] += 1
    nth = run.signal_names[name]
    step = f"{SIGNAL}{run.signals}"
    found = await run.recall(step)
    if found is NOT_RECORDED:
        wait = {"name": name, "until": None if until is None else until.isoformat()}
        found = await run.record(step, wait)
    until = None if found["until"] is None else datetime.fromisoformat(found["until"])
    durable, job = run.durable, run.job
    async with durable.store.transaction() as tx:
        held = await tx.signal_hold(job_id=job.id, worker_id=durable.worker_id, claim=job.claim)
        got = await tx.signal_wait(job_id=job.id, name=name, nth=nth, until=until) if held else None
    if got is None:
        raise run.lost(f"it did not wait for the signal {name!r}")
    if got.found:
        return got.payload
    if got.status is not None:
        raise Suspended(got.status, "signal")
    assert until is not None  # neither found nor waiting: its time limit has passed
    raise SignalTimeout(name, until)


def check_name(name: Any) -> None:
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME:
        raise ValueError(f"a signal's name is a string of 1 to {MAX_NAME} characters")
    fields.storable(name)


# A signal's name is an identifier, not a message: its payload carries the message.
MAX_NAME = 200
