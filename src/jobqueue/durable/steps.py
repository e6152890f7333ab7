"""Steps and checkpoints: the memo a durable handler replays against.

A handler may be run again from the top: after its worker died, after a failed attempt,
after a manual retry. What must not happen twice goes through ``ctx.step``, which runs
the function once per job and records its JSON result in the job's ``job_steps`` row;
any later run finds the row and returns the result instead of calling the function.

The record is fenced by the attempt's claim, as every outcome is: an attempt that lost
its job (its lease lapsed and another worker took it) records nothing, and learns so
by AttemptLost. A run reads its job's recorded steps once, at its first step, so a
handler that never calls ``ctx.step`` costs nothing, and one that does pays one read
per run and one write per step it runs.

``ctx.checkpoint`` saves a cursor in the job's own row; the claim hands it back to the
next attempt as ``ctx.last_checkpoint``, so reading it costs nothing either.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from jobqueue import results
from jobqueue.model.steps import RESERVED, SLEEP
from jobqueue.retry import Discard

if TYPE_CHECKING:
    from jobqueue.db.records import ClaimedJob
    from jobqueue.db.store import Store
    from jobqueue.enqueue.rows import Rows

T = TypeVar("T")

NOT_RECORDED = object()


def after(seconds: float, what: str = "seconds") -> datetime:
    """When a wait of ``seconds`` from now ends (ctx.sleep, a signal's timeout);
    ValueError naming ``what`` for a negative or NaN number."""
    if not seconds >= 0:
        raise ValueError(f"{what} must be 0 or more, got {seconds!r}")
    return datetime.now(UTC) + timedelta(seconds=seconds)


class Waiting(BaseException):  # not an error: the run ends here, on purpose
    """Raised by ``ctx.sleep``: this run ends, the job waits until ``until`` holding no
    slot, and its next run replays its steps. A BaseException, as asyncio's
    CancelledError is, so that a handler's ``except Exception`` does not swallow it."""

    def __init__(self, until: datetime) -> None:
        super().__init__(f"waiting until {until.isoformat()}")
        self.until = until


class Suspended(BaseException):  # not an error either
    """Raised by ``ctx.wait_for`` and ``ctx.wait_for_signal`` once the job's row says it
    waits (``status`` 'waiting'; or 'cancelled', asked to stop or cancelled by a failed
    child): the run ends here and writes nothing more. ``waits_for``: 'children' or
    'signal'."""

    def __init__(self, status: str, waits_for: str) -> None:
        super().__init__(f"{status}: waiting for {waits_for}")
        self.status = status
        self.waits_for = waits_for


class AttemptLost(Exception):
    """This attempt no longer holds its job: its lease lapsed and the job was rescued
    or taken by another worker, or it was cancelled or ended meanwhile. What the attempt
    tried to record (a step, a checkpoint) was not kept. Let it propagate: the
    attempt's outcome is refused as well, and the job's current holder carries on."""


class Durable:
    """What a worker's runs record their steps and checkpoints through: one per
    executor, shared by every context it makes (none is made per job)."""

    def __init__(
        self, store: Store, worker_id: str, max_result_bytes: int, rows: Rows | None = None
    ) -> None:
        self.store = store
        self.worker_id = worker_id
        self.max_result_bytes = max_result_bytes  # JOBQUEUE_MAX_RESULT_BYTES, as results
        self.rows = rows  # what ctx.spawn checks its children with, as enqueue does

    def run(self, job: ClaimedJob) -> DurableRun:
        return DurableRun(self, job)


class DurableRun:
    """One run's view of its job's steps: those recorded before it (read at its first
    step) and the names it has used, each of which may appear once per run."""

    __slots__ = (
        "_recorded", "_sleeps", "_used", "checkpoint_text", "durable", "job", "loop",
        "signal_names", "signals", "spawns",
    )  # fmt: skip

    def __init__(self, durable: Durable, job: ClaimedJob) -> None:
        self.durable = durable
        self.job = job
        self._recorded: dict[str, Any] | None = None
        self._used: set[str] = set()
        # This run's sleeps, spawns and waits for signals so far: the next one's name.
        self._sleeps = 0
        self.spawns = 0
        self.signals = 0
        self.signal_names: Counter[str] = Counter()  # this run's waits by signal name
        # The job's cursor as JSON text: as claimed, then as this run last saved it.
        self.checkpoint_text = job.checkpoint_json
        # The worker's loop, where the queries run; a sync handler's thread sends them there.
        self.loop = asyncio.get_running_loop()

    async def recall(self, name: str) -> Any:
        """What the step ``name`` returned when recorded, or NOT_RECORDED."""
        if not isinstance(name, str) or not name:
            raise ValueError("a step's name is a non-empty string")
        if name in self._used:
            raise ValueError(
                f"step {name!r} ran already in this run of job {self.job.id}; "
                "give each step a name of its own (a loop's: f'charge-{i}')"
            )
        self._used.add(name)
        if self._recorded is None:
            steps = await self.durable.store.job_steps(job_id=self.job.id)
            self._recorded = {step.name: step.result for step in steps}
        return self._recorded.get(name, NOT_RECORDED)

    async def record(self, name: str, value: Any) -> Any:
        """Record the step's result, fenced by the claim; return it as a later run will
        see it (decoded from its JSON). Raises AttemptLost; or Discard for a result that
        is not JSON or too large, which it would be again on any later attempt, after
        the step's side effect again: the job fails without another."""
        try:
            text = results.encode(value, self.durable.max_result_bytes)
        except results.ResultError as exc:
            raise Discard(f"step {name!r}: {exc}") from None
        held = await self.durable.store.step_record(
            job_id=self.job.id, name=name, result=text, worker_id=self.durable.worker_id,
            claim=self.job.claim,
        )  # fmt: skip
        if not held:
            raise self.lost(f"step {name!r} was not recorded")
        return None if text is None else json.loads(text)

    async def checkpoint(self, value: Any) -> None:
        """Save ``value`` as the job's cursor (None forgets it). Raises AttemptLost, or
        ResultError for a value that is not JSON or too large."""
        text = results.encode(value, self.durable.max_result_bytes)
        saved = await self.durable.store.checkpoint_save(
            job_id=self.job.id, value=text, worker_id=self.durable.worker_id,
            claim=self.job.claim,
        )  # fmt: skip
        if not saved:
            raise self.lost("its checkpoint was not saved")
        self.checkpoint_text = text

    async def step(
        self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """``ctx.step`` of an async handler."""
        _check_name(name)
        found = await self.recall(name)
        if found is not NOT_RECORDED:
            return found
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        return await self.record(name, value)

    def step_blocking(
        self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """``ctx.step`` of a sync handler, from its thread: the function runs there, the
        queries on the worker's loop."""
        _check_name(name)
        found = self.blocking(self.recall(name))
        if found is not NOT_RECORDED:
            return found
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = self.blocking(_awaited(value))
        return self.blocking(self.record(name, value))

    async def sleep_until(self, when: datetime) -> None:
        """``ctx.sleep_until``: the run's Nth sleep is the step "sleep-N", whose result
        is the time it waits for, set by the run that first reached it. Returns once
        that time has passed; until then raises Waiting, which ends the run."""
        if when.tzinfo is None:
            raise ValueError("sleep_until takes an aware datetime")
        self._sleeps += 1
        name = f"{SLEEP}{self._sleeps}"
        found = await self.recall(name)
        if found is NOT_RECORDED:
            found = await self.record(name, when.astimezone(UTC).isoformat())
        until = datetime.fromisoformat(found)
        if until > datetime.now(UTC):
            raise Waiting(until)

    def lost(self, what: str) -> AttemptLost:
        """The error of a write the fence refused: ``what`` did not happen."""
        job = self.job
        return AttemptLost(
            f"job {job.id}'s attempt {job.attempt} is no longer this worker's: {what}"
        )

    def blocking(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


def _check_name(name: str) -> None:
    if isinstance(name, str) and name.startswith(RESERVED):
        raise ValueError(
            f"step names starting {', '.join(map(repr, RESERVED))} are the run's own "
            f"(its sleeps, waits and spawns); got {name!r}"
        )


async def _awaited(value: Awaitable[T]) -> T:
    return await value
