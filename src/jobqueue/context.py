"""What a running handler may know about its job, and what it may say of it.

A handler that takes a second parameter receives it:

    @jq.task("import_rows")
    async def import_rows(payload: dict, ctx: JobContext) -> None:
        ctx.log.info("starting")                 # every line carries job_id, type, attempt
        for i, row in enumerate(rows):
            ...
            ctx.progress((i + 1) / len(rows), f"rows {i + 1}/{len(rows)}")
        key = ctx.idempotency_key                # the same on every attempt of this job

A durable handler (docs/durable.md) runs what must not happen twice as steps, recorded
with the job and returned, not run again, by any later run of it:

        charge = await ctx.step("charge", charge_card, order_id)

A sync handler receives a SyncJobContext, whose ``step``, ``checkpoint`` and
``iterate`` block instead of being awaited.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
)
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from jobqueue.logs import get_logger

if TYPE_CHECKING:
    from jobqueue.db.records import ClaimedJob
    from jobqueue.durable.steps import Durable, DurableRun

T = TypeVar("T")


class JobLog(Protocol):
    """Where ``ctx.log``'s lines are kept besides the worker's log: a structlog
    processor, closed once the attempt has ended (observability/joblogs.py)."""

    closed: bool

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> Any: ...


NO_META: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class JobContext:
    id: int
    type: str
    queue: str
    attempt: int
    max_attempts: int
    _cancel: threading.Event | None = field(default=None, repr=False, compare=False)
    _report: Callable[[float | None, str | None], None] | None = field(
        default=None, repr=False, compare=False
    )
    _job_log: JobLog | None = field(default=None, repr=False, compare=False)
    workflow_id: int | None = None
    """The workflow this job belongs to (docs/workflows.md), or None."""
    parent_results: dict[str, Any] = field(default_factory=dict)
    """A workflow job's parents' results by ref (None for a parent that returned
    nothing, or that failed or was cancelled and let this job run anyway)."""
    failed_parents: tuple[str, ...] = ()
    """The refs of the parents that did not complete (run_if "finished" or "failed",
    or a parent whose on_failure is "continue")."""
    tags: tuple[str, ...] = ()
    """The job's tags as it was claimed (docs/search.md)."""
    # The metadata as claimed: JSON text until ``meta`` is first read (most handlers
    # never read it, and decoding it for each was a sixth of a worker's CPU per job).
    _meta: Mapping[str, Any] | str | None = field(default=None, repr=False, compare=False)
    # Durable steps (jobqueue.durable): the worker's recorder, the job as claimed, and
    # this run's memo, made at its first step or checkpoint.
    _durable: Durable | None = field(default=None, repr=False, compare=False)
    _job: ClaimedJob | None = field(default=None, repr=False, compare=False)
    _run: DurableRun | None = field(default=None, repr=False, compare=False)

    @property
    def meta(self) -> Mapping[str, Any]:
        """The job's metadata object as it was claimed; read-only here (a pending job's
        is changed with PATCH /jobs/{id}, docs/job-edits.md)."""
        meta = self._meta
        if isinstance(meta, str):
            meta = MappingProxyType(json.loads(meta))
            object.__setattr__(self, "_meta", meta)  # frozen, but decoded once
        return NO_META if meta is None else meta

    @property
    def parent_result(self) -> Any:
        """The result of this job's only parent: what a chain passes on. ValueError
        for a job with several parents (read parent_results) or none."""
        if len(self.parent_results) != 1:
            raise ValueError(
                f"job {self.id} has {len(self.parent_results)} parents; read parent_results"
            )
        return next(iter(self.parent_results.values()))

    @property
    def cancel_requested(self) -> bool:
        """True once the job was cancelled while running. An async handler is cancelled
        for you; a sync one should check this now and then and return early: the job
        ends ``cancelled`` whatever the handler does after the request."""
        return self._cancel is not None and self._cancel.is_set()

    @property
    def idempotency_key(self) -> str:
        """Stable across attempts: a handler that must not act twice records this key
        with its side effect (at-least-once execution may run a job again)."""
        return f"jobqueue-job-{self.id}"

    @property
    def log(self) -> Any:
        """A structlog logger bound with this job's id, type and attempt, logging under
        the name ``jobqueue.job`` (docs/job-logs.md). Its lines are kept with the attempt
        too (per-job logs), unless JOBQUEUE_JOB_LOGS is off."""
        capture = self._job_log
        logger = (
            get_logger("jobqueue.job")
            if capture is None or capture.closed  # per-job logs off, or the attempt over
            else get_logger("jobqueue.job", capture)
        )
        if self.workflow_id is not None:
            logger = logger.bind(workflow_id=self.workflow_id)
        return logger.bind(job_id=self.id, type=self.type, attempt=self.attempt)

    def progress(self, fraction: float | None = None, message: str | None = None) -> None:
        """Report how far this attempt has got: ``fraction`` from 0 to 1 and/or a short
        message. Cheap to call often: the latest report is written at most once per
        JOBQUEUE_PROGRESS_INTERVAL, and shows in ``GET /jobs/{id}`` as ``progress``.
        Works from async and sync handlers alike. Raises ValueError for a fraction
        outside 0..1."""
        if self._report is not None:
            self._report(fraction, message)

    # -- durable steps (docs/durable.md) -------------------------------------------

    async def step(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` once for this job: its result (awaited if it is
        awaitable) is recorded with the job, and every later run of the job (a retry,
        a rescue after a crash, a manual retry) gets the recorded result back without
        calling ``fn``. Returns the result as JSON decodes it, on the first run as on
        later ones, so that the code after a step sees the same value either way.

        ``name`` names the step within the job, once per run (a loop gives each turn a
        name of its own). A step that raises is not recorded and runs again on the
        job's next attempt. Raises AttemptLost when this attempt no longer holds its
        job (nothing was recorded), and ValueError for a name used twice in one run."""
        return await self._durable_run().step(name, fn, args, kwargs)

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` without holding a worker's slot: this run ends, the job is
        ``waiting`` until then, and its next run replays its steps up to here and goes
        on. The time is set by the run that first reached this sleep, so a replay does
        not sleep again (docs/durable.md#durable-sleep). Sleeps are named by their order
        in the run: the handler reaches them in the same order on every run."""
        from jobqueue.durable.steps import after

        await self.sleep_until(after(seconds))

    async def sleep_until(self, when: datetime) -> None:
        """As ``sleep``, until ``when`` (an aware datetime)."""
        await self._durable_run().sleep_until(when)

    async def spawn(
        self, jobs: Iterable[tuple[Any, ...]], *, on_failure: str = "cancel"
    ) -> list[int]:
        """Enqueue child jobs of this one, each ``(type, payload)`` or ``(type, payload,
        options)`` (enqueue's options but unique keys), in one transaction with the step
        that records their ids: a later run of this job gets the same ids back and
        enqueues nothing (docs/durable.md#children). Spawns are named by their order in
        the run ("spawn-1"...), as sleeps are.

        ``on_failure``: "cancel" (a child that fails or is cancelled cancels this job and
        its other children) or "continue" (``wait_for`` returns a ChildFailed for it)."""
        from jobqueue.durable.children import spawn

        return await spawn(self._durable_run(), jobs, on_failure)

    async def wait_for(self, children: Iterable[int]) -> list[Any]:
        """The results of ``children`` (ids ``spawn`` returned), in their order, once
        every child this job has spawned has ended. Until then this run ends, the job
        ``waiting`` without holding a worker's slot; the last child to end makes it
        pending again, and its next run replays to here and returns the results."""
        from jobqueue.durable.children import wait_for

        return await wait_for(self._durable_run(), list(children))

    async def wait_for_signal(self, name: str, *, timeout: float | None = None) -> Any:
        """The payload of a signal ``name`` sent to this job (``POST /signals``,
        ``jq.signal``), whether it came before this call or after. Until it comes this
        run ends, the job ``waiting`` without holding a worker's slot. With ``timeout``
        (seconds, set by the run that first got here) raises SignalTimeout once it has
        passed with no such signal (docs/durable.md#signals)."""
        from jobqueue.durable.signals import wait_for_signal

        return await wait_for_signal(self._durable_run(), name, timeout)

    def step_key(self, name: str) -> str:
        """A key for step ``name``'s own side effect, the same on every attempt of the
        job: give it to the API the step calls (an idempotency key) to close the window
        between the side effect and its record (docs/durable.md)."""
        return f"jobqueue-job-{self.id}-step-{name}"

    @property
    def last_checkpoint(self) -> Any:
        """The cursor last saved with ``checkpoint``, by this attempt or an earlier one
        (the claim hands it over with the job); None if none was saved."""
        if self._run is not None:
            text = self._run.checkpoint_text
        else:
            text = None if self._job is None else self._job.checkpoint_json
        return None if text is None else json.loads(text)

    async def checkpoint(self, value: Any) -> None:
        """Save ``value`` (JSON) as the job's cursor, for ``last_checkpoint`` on its
        next attempt: where a long loop resumes after a crash or a failure. None forgets
        it. One write of the job's row per call: checkpoint every few hundred items or
        seconds, not every item (``iterate`` does). Raises AttemptLost when this attempt
        no longer holds its job (nothing was saved)."""
        await self._durable_run().checkpoint(value)

    async def iterate(
        self,
        items: Iterable[T] | AsyncIterable[T],
        *,
        every: int | None = 100,
        seconds: float | None = None,
    ) -> AsyncIterator[T]:
        """The items, resuming after those an earlier attempt finished: the position is
        the job's checkpoint, saved after every ``every`` items and every ``seconds``
        seconds (None: not by that measure), and once the items run out. An item is
        finished when the loop asks for the next one, so an attempt that dies while
        handling item 250 resumes at the last position saved before it (200, with
        ``every=100``), and runs items 200 to 249 again. ``items`` must come in the same
        order on every attempt. It uses the checkpoint: a job that iterates does not
        also call ``checkpoint``."""
        start, due = self._iteration(every, seconds)
        index = 0
        async for item in _aiter(items):
            if index >= start:
                if index > start and due(index):
                    await self.checkpoint(index)
                yield item
            index += 1
        if index > start:
            await self.checkpoint(index)

    def _iteration(
        self, every: int | None, seconds: float | None
    ) -> tuple[int, Callable[[int], bool]]:
        """Where ``iterate`` starts, and when a position is due to be saved."""
        if every is not None and every < 1:
            raise ValueError(f"every must be at least 1, got {every}")
        if seconds is not None and not seconds > 0:
            raise ValueError(f"seconds must be positive, got {seconds}")
        start = self.last_checkpoint
        if start is None:
            start = 0
        elif not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise TypeError(
                f"job {self.id}'s checkpoint is {start!r}, not a position that iterate saved"
            )
        saved = [start, time.monotonic()]

        def due(index: int) -> bool:
            now = time.monotonic()
            if (every is not None and index - saved[0] >= every) or (
                seconds is not None and now - saved[1] >= seconds
            ):
                saved[0], saved[1] = index, now
                return True
            return False

        return start, due

    def _durable_run(self) -> DurableRun:
        run = self._run
        if run is None:
            if self._durable is None or self._job is None:
                raise RuntimeError(
                    "durable steps need the context a worker gives its handler; an "
                    "isolated handler (a process of its own) has none"
                )
            run = self._durable.run(self._job)
            object.__setattr__(self, "_run", run)
        return run


@dataclass(frozen=True, slots=True)
class SyncJobContext(JobContext):
    """A sync handler's context: ``step``, ``checkpoint`` and ``iterate`` block, from the
    handler's thread, where JobContext's are awaited. Everything else is JobContext's."""

    def step(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """As JobContext.step; ``fn`` runs in the handler's thread."""
        return self._durable_run().step_blocking(name, fn, args, kwargs)

    def sleep(self, seconds: float) -> None:  # type: ignore[override]
        """As JobContext.sleep."""
        from jobqueue.durable.steps import after

        self.sleep_until(after(seconds))

    def sleep_until(self, when: datetime) -> None:  # type: ignore[override]
        """As JobContext.sleep_until."""
        run = self._durable_run()
        run.blocking(run.sleep_until(when))

    def spawn(  # type: ignore[override]
        self, jobs: Iterable[tuple[Any, ...]], *, on_failure: str = "cancel"
    ) -> list[int]:
        """As JobContext.spawn."""
        from jobqueue.durable.children import spawn

        run = self._durable_run()
        return run.blocking(spawn(run, list(jobs), on_failure))

    def wait_for(self, children: Iterable[int]) -> list[Any]:  # type: ignore[override]
        """As JobContext.wait_for."""
        from jobqueue.durable.children import wait_for

        run = self._durable_run()
        return run.blocking(wait_for(run, list(children)))

    def wait_for_signal(self, name: str, *, timeout: float | None = None) -> Any:
        """As JobContext.wait_for_signal."""
        from jobqueue.durable.signals import wait_for_signal

        run = self._durable_run()
        return run.blocking(wait_for_signal(run, name, timeout))

    def checkpoint(self, value: Any) -> None:  # type: ignore[override]
        """As JobContext.checkpoint."""
        run = self._durable_run()
        run.blocking(run.checkpoint(value))

    def iterate(  # type: ignore[override]
        self, items: Iterable[T], *, every: int | None = 100, seconds: float | None = None
    ) -> Iterator[T]:
        """As JobContext.iterate."""
        start, due = self._iteration(every, seconds)
        index = 0
        for item in items:
            if index >= start:
                if index > start and due(index):
                    self.checkpoint(index)
                yield item
            index += 1
        if index > start:
            self.checkpoint(index)


async def _aiter(items: Iterable[T] | AsyncIterable[T]) -> AsyncIterator[T]:
    if isinstance(items, AsyncIterable):
        async for item in items:
            yield item
    else:
        for item in items:
            yield item
