"""What a running handler may know about its job.

A handler that takes a second parameter receives it::

    @jq.task("charge")
    async def charge(payload: dict, ctx: JobContext) -> None:
        key = ctx.idempotency_key   # the same on every attempt of this job
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class JobContext:
    id: int
    type: str
    queue: str
    attempt: int
    max_attempts: int

    @property
    def idempotency_key(self) -> str:
        """Stable across attempts: a handler that must not act twice records this key
        with its side effect (at-least-once execution may run a job again)."""
        return f"jobqueue-job-{self.id}"
