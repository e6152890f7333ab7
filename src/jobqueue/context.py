"""What a running handler may know about its job, and what it may say of it.

A handler that takes a second parameter receives it:

    @jq.task("import_rows")
    async def import_rows(payload: dict, ctx: JobContext) -> None:
        ctx.log.info("starting")                 # every line carries job_id, type, attempt
        for i, row in enumerate(rows):
            ...
            ctx.progress((i + 1) / len(rows), f"rows {i + 1}/{len(rows)}")
        key = ctx.idempotency_key                # the same on every attempt of this job
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from jobqueue.logs import get_logger


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
