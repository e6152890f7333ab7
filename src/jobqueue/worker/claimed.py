"""A job as a worker holds it: what the claim returned."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jobqueue.context import JobContext


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    id: int
    type: str
    queue: str
    payload: Any
    attempt: int
    max_attempts: int
    priority: int

    @classmethod
    def from_record(cls, r: Any) -> ClaimedJob:
        # Positional access: claim.sql returns id, type, queue, payload, attempts,
        # max_attempts, priority, in that order.
        payload = r[3]
        return cls(
            r[0], r[1], r[2], {} if payload == "{}" else json.loads(payload), r[4], r[5], r[6]
        )

    def context(
        self,
        cancel: threading.Event | None = None,
        report: Callable[[ClaimedJob, float | None, str | None], None] | None = None,
    ) -> JobContext:
        """The handler's view of this job; ``report`` receives its progress reports."""
        on_progress = None if report is None else functools.partial(report, self)
        return JobContext(
            self.id, self.type, self.queue, self.attempt, self.max_attempts, cancel, on_progress
        )

    @property
    def attempts_left(self) -> bool:
        return self.attempt < self.max_attempts


def held(jobs: Sequence[ClaimedJob]) -> str:
    """The attempts a fenced write claims to hold, as the JSON object its SQL takes:
    ``{"<job id>": attempt, ...}`` (see db/queries/complete.sql for why not an array)."""
    return json.dumps({str(job.id): job.attempt for job in jobs})


def fenced_out(jobs: Sequence[ClaimedJob], changed: Sequence[Any]) -> list[ClaimedJob]:
    """The jobs a fenced write did not change (``changed``: the rows it returned, each
    with an ``id``): they were taken from this worker meanwhile."""
    if len(changed) == len(jobs):
        return []
    ids = {row["id"] for row in changed}
    return [job for job in jobs if job.id not in ids]
