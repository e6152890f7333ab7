"""What a running handler may know about its job.

A handler that takes a second parameter receives it::

    @jq.task("charge")
    async def charge(payload: dict, ctx: JobContext) -> None:
        key = ctx.idempotency_key   # the same on every attempt of this job
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class JobContext:
    id: int
    type: str
    queue: str
    attempt: int
    max_attempts: int
    _cancel: threading.Event | None = field(default=None, repr=False, compare=False)

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
