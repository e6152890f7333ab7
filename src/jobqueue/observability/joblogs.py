"""Per-job logs: what a handler logs is kept with its attempt (``GET /jobs/{id}/attempts``,
``jobqueue jobs logs``).

The executor makes an attempt's capture (``attempt``) with its handler's context,
whose ``ctx.log`` hands each line to it: only a handler that takes a context has a
``ctx.log``, so no other pays for one. With JOBQUEUE_JOB_LOGS=all the writer is also
an attempt observer: ``started`` makes the capture for every attempt and puts it in
a context variable, which a stdlib logging handler reads; the variable is the
attempt's own, so concurrent attempts never see each other's records, and a sync
handler's thread runs in a copy of it. ``settle`` closes the capture before the
outcome is written, writing its last lines: later ones are not kept.

A line costs its rendering and a list append; nothing is written per line. One
statement appends every attempt's new lines, at once after a quiet spell and then at
most once per JOBQUEUE_PROGRESS_INTERVAL. Writes are fenced like progress: a stale
attempt's lines never land. An attempt keeps at most JOBQUEUE_JOB_LOG_BYTES; the line
that crosses the bound is cut there, and a marker line ends the log.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
import traceback
from collections.abc import Coroutine, MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from jobqueue.checkpoints import Signal, Signals
from jobqueue.db.pool import log_failure
from jobqueue.db.records import ClaimedJob, LogChunk
from jobqueue.db.store import Store
from jobqueue.logs import get_logger
from jobqueue.observability.attempts import Outcome
from jobqueue.sync_bridge import set_event

log = get_logger("jobqueue.joblogs")

# The capture of the attempt running in this context, for stdlib logging (=all only).
current_capture: ContextVar[Capture | None] = ContextVar("jobqueue_capture", default=None)

# What a line shows besides its event: the rest is the attempt's, already known.
BOUND = frozenset({"job_id", "type", "attempt", "exc_info", "event"})
# A field value shown as it is; any other is quoted.
_PLAIN = re.compile(r"[^\s='\"]+")


def marker(limit: int) -> str:
    return f"[jobqueue] log truncated: more than {limit} bytes (JOBQUEUE_JOB_LOG_BYTES)\n"


def cut(data: bytes, used: int, limit: int) -> str:
    """The part of ``data`` (UTF-8) that fits after ``used`` bytes of a log bounded at
    ``limit``, whole characters only, and the marker line that ends the log."""
    kept = data[: max(limit - used, 0)].decode(errors="ignore")
    return kept + ("" if not kept or kept.endswith("\n") else "\n") + marker(limit)


_second: tuple[int, str] = (-1, "")  # the last second formatted, and its text


def now() -> str:
    """The time for a line, UTC to the millisecond; the second's text is formatted once
    per second, which halves the cost of a line kept."""
    global _second
    t = time.time()
    second = int(t)
    if _second[0] != second:
        _second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{_second[1]}.{int((t - second) * 1000):03d}Z"


class Capture:
    """One attempt's log, as its lines arrive; from any thread. A structlog processor."""

    used = 0  # bytes kept
    truncated = False
    closed = False  # the handler returned: later lines are not its own
    added = 0  # lines kept, and how many of them the writer has written
    written = 0
    unwritten: list[str]  # guarded by the writer's lock; set as the first line comes

    def __init__(self, job: ClaimedJob, writer: JobLogs) -> None:
        self.job = job
        self._writer = writer

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        """A structlog processor: keep the line, pass the event on unchanged."""
        extra = " ".join(f"{k}={_value(v)}" for k, v in event.items() if k not in BOUND)
        line = f"{now()} {method} {event.get('event', '')}{' ' if extra else ''}{extra}\n"
        self.add(line + _exception(event.get("exc_info")))
        return event

    def add(self, text: str) -> None:
        if self.closed or self.truncated:
            return
        data = text.encode()
        limit = self._writer.limit
        if self.used + len(data) > limit:
            text = cut(data, self.used, limit)
            self.truncated = True
            data = text.encode()
        self.used += len(data)
        self._writer.keep(self, text)


@dataclass
class JobLogSignals(Signals):
    written: Signal[int] = field(default_factory=Signal)  # a write ended: attempts written


class JobLogs:
    """The per-job log observer of one worker, and the writer of what it keeps."""

    def __init__(
        self, store: Store, worker_id: str, *, limit: int, interval: float, stdlib: bool
    ) -> None:
        self._store = store
        self._worker_id = worker_id
        self.limit = limit  # bytes per attempt
        self._interval = interval
        self._stdlib = StdlibCapture() if stdlib else None
        self._lock = threading.Lock()  # lines come from handler threads too
        self._pending: dict[int, Capture] = {}  # captures with unwritten lines
        self._open: dict[int, Capture] = {}  # by job id, until settled
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kept = asyncio.Event()
        self._writing: asyncio.Future[None] | None = None
        self.signals = JobLogSignals()

    @property
    def stdlib(self) -> bool:
        """Whether stdlib logging records are kept too (JOBQUEUE_JOB_LOGS=all)."""
        return self._stdlib is not None

    def attempt(self, job: ClaimedJob) -> Capture:
        """``job``'s capture, made on first use: what its ``ctx.log`` hands lines to."""
        capture = self._open.get(job.id)
        if capture is None or capture.job is not job:
            capture = self._open[job.id] = Capture(job, self)
        return capture

    def settle(self, job: ClaimedJob) -> Coroutine[Any, Any, None] | None:
        """Close ``job``'s log; what to await, if it has unwritten lines, to write them
        before its outcome is written: an ended attempt shows its last lines. (Not a
        coroutine: most attempts log nothing, and need not pay for one.) Never raises."""
        capture = self.forget(job)
        if capture is None or capture.written >= capture.added:
            return None
        return self._settle(capture)

    def forget(self, job: ClaimedJob) -> Capture | None:
        """Close ``job``'s log, its lines still unwritten left to the next write (where
        the fence refuses them if the outcome was written first)."""
        capture = self._open.get(job.id) if self._open else None
        if capture is None or capture.job is not job:
            return None
        del self._open[job.id]
        capture.closed = True
        return capture

    # -- the observer, with JOBQUEUE_JOB_LOGS=all -----------------------------------

    def started(self, job: ClaimedJob) -> object:
        current_capture.set(self.attempt(job))
        return None

    def ended(
        self,
        job: ClaimedJob,
        state: object,
        outcome: Outcome,
        seconds: float,
        error: BaseException | None,
    ) -> None:
        pass  # the executor settles or forgets every attempt's log

    # -- the writer ---------------------------------------------------------------

    def keep(self, capture: Capture, text: str) -> None:
        """Buffer ``text`` for the next write; from any thread."""
        with self._lock:
            capture.added += 1
            if id(capture) in self._pending:
                capture.unwritten.append(text)
                return
            capture.unwritten = [text]
            first = not self._pending
            self._pending[id(capture)] = capture
        if first and self._loop is not None:
            set_event(self._kept, self._loop)

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._stdlib is not None:
            logging.getLogger().addHandler(self._stdlib)
        try:
            while True:
                await self._kept.wait()
                self._kept.clear()
                await self.flush()
                await asyncio.sleep(self._interval)
        finally:
            if self._stdlib is not None:
                logging.getLogger().removeHandler(self._stdlib)

    async def _settle(self, capture: Capture) -> None:
        while capture.written < capture.added:
            if self._writing is not None:  # its lines may be in this write
                await asyncio.shield(self._writing)
            else:
                await self.flush()

    async def flush(self) -> None:
        """Write every attempt's unwritten lines, in one statement; a call made while
        a write runs waits for it and then writes what came meanwhile, so that attempts
        ending together share statements. Never raises: a log must not fail a job."""
        while self._writing is not None:
            await asyncio.shield(self._writing)
        self._writing = asyncio.ensure_future(self._write())
        await asyncio.shield(self._writing)

    async def _write(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
            taken = [(c, "".join(c.unwritten), c.added) for c in pending.values()]
        try:
            if taken:
                written = await self._store.job_log_append(
                    chunks=_latest_attempts(taken), worker_id=self._worker_id
                )
                self.signals.written.fire(written)
        except Exception as exc:
            log_failure(log, exc, "writing job logs failed", "log lines dropped")
        finally:
            for capture, _, added in taken:
                capture.written = added
            self._writing = None


def _latest_attempts(taken: list[tuple[Capture, str, int]]) -> list[LogChunk]:
    """One chunk per job: if a job's stale attempt and its new one both logged, the
    new one's (the fence would refuse the stale one's anyway)."""
    chunks: dict[int, LogChunk] = {}
    for capture, text, _ in taken:
        held = chunks.get(capture.job.id)
        if held is None or held.job.attempt < capture.job.attempt:
            chunks[capture.job.id] = LogChunk(capture.job, text, capture.truncated)
    return list(chunks.values())


class StdlibCapture(logging.Handler):
    """Keeps the stdlib logging records emitted in an attempt's context with it."""

    def emit(self, record: logging.LogRecord) -> None:
        capture = current_capture.get()
        # jobqueue's own records: ctx.log's lines are kept already (Capture), and the
        # worker's events are its, not the handler's.
        if capture is None or record.name.startswith("jobqueue."):
            return
        try:
            line = f"{now()} {record.levelname.lower()} {record.name}: {record.getMessage()}\n"
            capture.add(line + _exception(record.exc_info))
        except Exception:
            self.handleError(record)


def _value(value: Any) -> str:
    """A field's value as a line shows it: quoted only where it would be ambiguous."""
    text = str(value)
    return text if _PLAIN.fullmatch(text) else repr(text)


def _exception(exc_info: Any) -> str:
    """The traceback a line asks for, as text ("" for none)."""
    if not exc_info:
        return ""
    if exc_info is True:
        return traceback.format_exc()
    if isinstance(exc_info, BaseException):
        return "".join(traceback.format_exception(exc_info))
    if isinstance(exc_info, tuple) and exc_info[0] is not None:
        return "".join(traceback.format_exception(*exc_info))
    return ""
