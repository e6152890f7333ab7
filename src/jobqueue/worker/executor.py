"""Runs handlers: async ones as tasks on the event loop, sync ones in a thread pool.

The executor owns the slots (``WORKER_COUNT``): a job holds one from claim to
outcome. A handler that raises fails only its own attempt.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobqueue import results
from jobqueue.checkpoints import Signal, Signals
from jobqueue.context import JobContext, JobLog, SyncJobContext
from jobqueue.db.records import ClaimedJob, ParentResult
from jobqueue.durable.steps import Suspended, Waiting
from jobqueue.logs import get_logger
from jobqueue.observability import lifecycle
from jobqueue.observability.attempts import AttemptObserver, Outcome
from jobqueue.retry import Discard, RetryAt, RetryPolicy, Snooze
from jobqueue.task import PayloadError, Task
from jobqueue.worker.completer import Completer
from jobqueue.worker.isolation import IsolatedFailure, run_isolated
from jobqueue.worker.progress import ProgressWriter

if TYPE_CHECKING:
    from jobqueue.context import JobLog
    from jobqueue.durable.steps import Durable
    from jobqueue.observability.joblogs import JobLogs

log = get_logger("jobqueue.executor")

MAX_ERROR_CHARS = 4000
# The end of a traceback holds the frames that raised: keep that part.
MAX_TRACEBACK_CHARS = 8000


class UnknownJobType(Exception):
    pass


class JobTimeout(Exception):
    pass


@dataclass
class ExecutorSignals(Signals):
    started: Signal[int] = field(default_factory=Signal)  # a job's attempt began: its id
    finished: Signal[int] = field(default_factory=Signal)  # and ended, its outcome buffered


class Executor:
    def __init__(
        self,
        tasks: Mapping[str, Task[Any, Any]],
        slots: int,
        completer: Completer,
        retry: RetryPolicy,
        on_retry_scheduled: Callable[[float], None],
        default_timeout: float | None = None,
        max_result_bytes: int = 64 * 1024,
        progress: ProgressWriter | None = None,
        observers: Sequence[AttemptObserver] = (),
        job_logs: JobLogs | None = None,
        worker_id: str | None = None,
        parents: Callable[[int], Awaitable[list[ParentResult]]] | None = None,
        durable: Durable | None = None,
    ) -> None:
        self._tasks = tasks
        self._slots = slots
        self._completer = completer
        self._retry = retry
        # Called whenever a job gives back its slot (the producer's wake-up), set by
        # whoever builds the producer on top of this executor.
        self.on_slot_freed: Callable[[], None] = lambda: None
        self._on_retry_scheduled = on_retry_scheduled
        self._default_timeout = default_timeout
        self._max_result_bytes = max_result_bytes
        self._progress = progress
        self._report = None if progress is None else progress.report
        self._observers = tuple(observers)
        self._job_logs = job_logs
        self._worker_id = worker_id  # for the log events
        self._parents = parents  # a workflow job's parents, for its context
        self._durable = durable  # what ctx.step and ctx.checkpoint record through
        # Set by the metrics (observability/metrics.py), which add it up in bulk: one
        # extend per attempt costs a fraction of an observer's calls. Six items per
        # attempt: queue, type, run_at, outcome, monotonic start and end (no job kept).
        self.attempt_log: list[Any] | None = None
        # One thread per slot, so sync handlers never wait for each other.
        self._threads = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="jobqueue-handler")
        self._running: dict[int, tuple[ClaimedJob, asyncio.Task[None]]] = {}
        self._per_queue: collections.Counter[str] = collections.Counter()
        # Jobs cancelled while running here, and the flags sync handlers can read.
        self._cancel_requested: set[int] = set()
        self._cancel_flags: dict[int, threading.Event] = {}
        self.signals = ExecutorSignals()

    @property
    def slots(self) -> int:
        """Jobs this executor runs at once (WORKER_COUNT)."""
        return self._slots

    @property
    def free_slots(self) -> int:
        return self._slots - len(self._running)

    @property
    def running(self) -> int:
        return len(self._running)

    def running_in(self, queue: str) -> int:
        return self._per_queue[queue]

    def running_jobs(self) -> list[ClaimedJob]:
        return [job for job, _ in self._running.values()]

    def start(self, job: ClaimedJob) -> None:
        self._per_queue[job.queue] += 1
        # The loop's create_task, not asyncio's (one call less per job, same task).
        task = asyncio.get_running_loop().create_task(self._run(job))
        self._running[job.id] = (job, task)

    def cancel(self, job_id: int) -> None:
        """The job was cancelled while running here: stop it where that is possible
        (an async handler is cancelled, an isolated one killed; a sync one sees
        ``ctx.cancel_requested``), and end it ``cancelled`` whatever its handler does."""
        entry = self._running.get(job_id)
        if entry is None or job_id in self._cancel_requested:
            return  # not ours (any more), or already on its way out
        job, runner = entry
        self._cancel_requested.add(job_id)
        log.info(f"Job {job_id} cancelled while running", job_id=job_id)
        flag = self._cancel_flags.get(job_id)
        if flag is not None:
            flag.set()
        task = self._tasks.get(job.type)
        if task is None or task.is_async or task.isolated:
            runner.add_done_callback(lambda _: self._never_started(job))
            runner.cancel()

    def _never_started(self, job: ClaimedJob) -> None:
        # A task cancelled before its first step never runs _run, nor its finally.
        if job.id in self._running:
            self._completer.cancel(job)
            self._finished(job)

    async def _run(self, job: ClaimedJob) -> None:
        self.signals.started.fire(job.id)
        # job.started and the other info events are an observer's, installed only with
        # info on (observability/lifecycle.py); the warnings are logged here. Per-job
        # logs are no observer either, unless they capture stdlib logging: ctx.log's
        # capture is made with the handler's context (_job_log), settled below.
        # Taken first, so that an event logged here and one logged by an observer as
        # the attempt starts agree on when it did (observers' starts take microseconds).
        started = time.monotonic()
        observed = self._observe_start(job) if self._observers else None
        outcome: Outcome = "completed"
        error: BaseException | None = None
        try:
            result = await self._invoke(job)
            if self._progress is not None and (writing := self._progress.settle(job.id)):
                await writing
            if self._job_logs is not None and (writing := self._job_logs.settle(job)):
                await writing
        except asyncio.CancelledError as exc:
            error = exc
            if job.id in self._cancel_requested:
                outcome = "cancelled"
                self._completer.cancel(job)  # our own cancel(): the job ends here
                return
            # Otherwise only shutdown cancels a job: hand it back, the attempt not counted.
            outcome = "released"
            lifecycle.went_wrong(job, outcome, self._worker_id, started)
            self._completer.release(job)
            raise
        except Waiting as asleep:  # ctx.sleep: the run ends, the job waits
            await self._settle(job)
            outcome = "waiting"
            self._completer.sleep(job, asleep.until)
            lifecycle.waiting(job, self._worker_id, started, asleep.until)
        except Suspended as waited:  # ctx.wait_for and the like: the job's row says so
            await self._settle(job)
            outcome = "waiting" if waited.status == "waiting" else "cancelled"
            lifecycle.waiting(job, self._worker_id, started, None, waited.waits_for)
        except Exception as exc:
            error = exc
            if job.id in self._cancel_requested:
                outcome = "cancelled"
                self._completer.cancel(job)
            else:
                await self._settle(job)  # where it got to, for whoever looks
                outcome = (
                    self._snoozed(job, exc, started)
                    if isinstance(exc, Snooze)
                    else self._failed(job, exc, started)
                )
        else:
            if job.id in self._cancel_requested:  # returned after the cancel: cancelled
                outcome = "cancelled"
                self._completer.cancel(job)
                return
            self._completer.complete(job, result)
        finally:
            if observed is not None:
                self._observe_end(job, observed, outcome, time.monotonic() - started, error)
            if self.attempt_log is not None:
                self.attempt_log.extend(
                    (job.queue, job.type, job.run_at, outcome, started, time.monotonic())
                )
            self._finished(job)

    async def _settle(self, job: ClaimedJob) -> None:
        """Write the attempt's last progress report and log lines."""
        if self._progress is not None and (writing := self._progress.settle(job.id)):
            await writing
        if self._job_logs is not None and (writing := self._job_logs.settle(job)):
            await writing

    def _observe_start(self, job: ClaimedJob) -> list[object]:
        states: list[object] = []
        for observer in self._observers:
            try:
                states.append(observer.started(job))
            except Exception:
                log.exception("an attempt observer failed; the job runs on", job_id=job.id)
                states.append(None)
        return states

    def _observe_end(
        self,
        job: ClaimedJob,
        states: list[object],
        outcome: Outcome,
        seconds: float,
        error: BaseException | None,
    ) -> None:
        for observer, state in zip(self._observers, states, strict=True):
            try:
                observer.ended(job, state, outcome, seconds, error)
            except Exception:
                log.exception("an attempt observer failed; the outcome stands", job_id=job.id)

    def _finished(self, job: ClaimedJob) -> None:
        del self._running[job.id]
        if self._job_logs is not None:  # settled already, unless cancelled or released
            self._job_logs.forget(job)
        self._per_queue[job.queue] -= 1
        if self._cancel_requested:
            self._cancel_requested.discard(job.id)
        if self._cancel_flags:
            self._cancel_flags.pop(job.id, None)
        self.signals.finished.fire(job.id)
        self.on_slot_freed()

    async def _invoke(self, job: ClaimedJob) -> str | None:
        """Run the job's handler; return its result as JSON text (or None)."""
        task = self._tasks.get(job.type)
        if task is None:
            raise UnknownJobType(f"no handler for type {job.type}")
        try:
            payload = task.load(job.payload)
        except PayloadError as exc:  # it would not match on any later attempt either
            raise Discard(str(exc)) from None
        # Only a workflow job's handler that takes a context reads its parents: one query.
        parents = None
        if job.workflow_id is not None and task.takes_context and self._parents is not None:
            parents = await self._parents(job.id)
        if not task.takes_context:
            args: tuple[Any, ...] = (payload,)
        elif task.isolated:  # stopped by cancellation itself; in a process of its own
            args = (payload, context_of(job, parents=parents))
        elif task.is_async:  # stopped by cancellation itself
            args = (
                payload,
                context_of(job, None, self._report, self._job_log(job), parents, self._durable),
            )
        else:
            flag = self._cancel_flags[job.id] = threading.Event()
            args = (
                payload,
                sync_context_of(
                    job, flag, self._report, self._job_log(job), parents, self._durable
                ),
            )
        timeout = task.timeout if task.timeout is not None else self._default_timeout
        if timeout is None:  # the common case, on the hot path: no timeout context
            if task.is_async and not task.isolated:  # as _call, without its frame
                value = await task.fn(*args)
                return None if value is None else self._encoded(value)
            return await self._call(task, args)
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                return await self._call(task, args)
        except TimeoutError:
            if deadline.expired():  # ours, not a TimeoutError the handler raised
                raise JobTimeout(f"job exceeded its timeout of {timeout:g}s") from None
            raise

    def _job_log(self, job: ClaimedJob) -> JobLog | None:
        """Where ``ctx.log`` keeps this attempt's lines: made only for a handler that
        takes a context, the only kind that has a ``ctx.log``."""
        return None if self._job_logs is None else self._job_logs.attempt(job)

    async def _call(self, task: Task[Any, Any], args: tuple[Any, ...]) -> str | None:
        if task.isolated:
            return await run_isolated(task, args, self._max_result_bytes)
        value = await task.fn(*args) if task.is_async else await self._in_thread(task.fn, args)
        return None if value is None else self._encoded(value)

    def _encoded(self, value: Any) -> str | None:
        """A handler's result as the JSON text to store."""
        try:
            return results.encode(value, self._max_result_bytes)
        except results.ResultError as exc:  # it would be the same on any later attempt
            raise Discard(str(exc)) from None

    async def _in_thread(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, context.run, fn, *args)

    def _failed(self, job: ClaimedJob, exc: Exception, started: float) -> Outcome:
        """Buffer the failed attempt's outcome, log it, and say which it is."""
        plain = isinstance(exc, UnknownJobType | JobTimeout | IsolatedFailure | RetryAt | Discard)
        error = (str(exc) if plain else f"{type(exc).__name__}: {exc}")[:MAX_ERROR_CHARS]
        if isinstance(exc, Discard):
            error = f"discarded: {error}"[:MAX_ERROR_CHARS]
        delay = self._retry_delay(job, exc)
        trace = None if plain else "".join(traceback.format_exception(exc))[-MAX_TRACEBACK_CHARS:]
        self._completer.fail(job, error, trace, delay)
        outcome: Outcome = (
            "retried"
            if delay is not None
            else "discarded"
            if isinstance(exc, Discard)
            else "failed"
        )
        lifecycle.went_wrong(
            job, outcome, self._worker_id, started, error=error, retry_in=delay,
            exc=None if plain else exc,
        )  # fmt: skip
        if delay is not None:
            self._on_retry_scheduled(delay)
        return outcome

    def _snoozed(self, job: ClaimedJob, snooze: Snooze, started: float) -> Outcome:
        """Buffer the snooze: due again after its delay, the attempt not counted."""
        delay = snooze.delay()
        self._completer.snooze(job, delay)
        lifecycle.snoozed(job, self._worker_id, started, delay)
        self._on_retry_scheduled(delay)
        return "snoozed"

    def _retry_delay(self, job: ClaimedJob, exc: Exception) -> float | None:
        """Seconds until the next attempt; None when there is none (the job fails)."""
        if isinstance(exc, Discard) or not job.attempts_left:
            return None
        if isinstance(exc, RetryAt):
            return exc.delay()
        task = self._tasks.get(job.type)
        policy = task.retry if task is not None and task.retry is not None else self._retry
        try:
            return max(0.0, float(policy(job.attempt)))
        except Exception:
            log.exception(f"retry policy of {job.type!r} failed; the default applies")
            return max(0.0, float(self._retry(job.attempt)))

    async def wait_idle(self, timeout: float, force: asyncio.Event) -> None:
        """Wait until no job runs, ``timeout`` passes, or ``force`` is set."""
        deadline = time.monotonic() + timeout
        while self._running and not force.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            stop = asyncio.ensure_future(force.wait())
            await asyncio.wait(
                [stop, *(task for _, task in self._running.values())],
                timeout=remaining,
                return_when=asyncio.FIRST_COMPLETED,
            )
            stop.cancel()

    async def cancel_all(self) -> int:
        """Cancel every running job and hand it back; return how many."""
        running = list(self._running.values())
        for _, task in running:
            task.cancel()
        await asyncio.gather(*(task for _, task in running), return_exceptions=True)
        # A task cancelled before its first step never ran its handler, nor its
        # own hand-back: hand those jobs back here.
        for job, _ in list(self._running.values()):
            self._completer.release(job)
        self._running.clear()
        self._per_queue.clear()
        return len(running)

    def shutdown_threads(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)


def context_of(
    job: ClaimedJob,
    cancel: threading.Event | None = None,
    report: Callable[[ClaimedJob, float | None, str | None], None] | None = None,
    job_log: JobLog | None = None,
    parents: list[ParentResult] | None = None,
    durable: Durable | None = None,
) -> JobContext:
    """The handler's view of ``job``; ``report`` receives its progress reports,
    ``job_log`` keeps its log lines; ``parents``: a workflow job's; ``durable``: what
    its steps are recorded through."""
    on_progress = None if report is None else functools.partial(report, job)
    if not parents:
        if job.tags is None and job.meta_json is None:
            return JobContext(
                job.id, job.type, job.queue, job.attempt, job.max_attempts, cancel,
                on_progress, job_log, job.workflow_id, {}, (), (), None, durable, job,
            )  # fmt: skip
        return JobContext(
            job.id, job.type, job.queue, job.attempt, job.max_attempts, cancel, on_progress,
            job_log, job.workflow_id, {}, (), () if job.tags is None else tuple(job.tags),
            job.meta_json, durable, job,
        )  # fmt: skip
    return JobContext(
        job.id, job.type, job.queue, job.attempt, job.max_attempts, cancel, on_progress,
        job_log, job.workflow_id, {p.ref: p.result for p in parents},
        tuple(p.ref for p in parents if p.status != "completed"),
        () if job.tags is None else tuple(job.tags), job.meta_json, durable, job,
    )  # fmt: skip


def sync_context_of(
    job: ClaimedJob,
    cancel: threading.Event,
    report: Callable[[ClaimedJob, float | None, str | None], None] | None,
    job_log: JobLog | None,
    parents: list[ParentResult] | None,
    durable: Durable | None,
) -> SyncJobContext:
    """A sync handler's view of ``job``, as context_of's. Its durable run is made here,
    on the worker's loop, which the handler's thread sends its steps' queries to."""
    on_progress = None if report is None else functools.partial(report, job)
    return SyncJobContext(
        job.id, job.type, job.queue, job.attempt, job.max_attempts, cancel, on_progress,
        job_log, job.workflow_id, {} if not parents else {p.ref: p.result for p in parents},
        () if not parents else tuple(p.ref for p in parents if p.status != "completed"),
        () if job.tags is None else tuple(job.tags), job.meta_json, durable, job,
        None if durable is None else durable.run(job),
    )  # fmt: skip
