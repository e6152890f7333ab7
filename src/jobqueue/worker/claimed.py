"""A job as a worker holds it: what the claim returned."""

from __future__ import annotations

import json
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
        return cls(
            r["id"],
            r["type"],
            r["queue"],
            json.loads(r["payload"]),
            r["attempts"],
            r["max_attempts"],
            r["priority"],
        )

    def context(self) -> JobContext:
        return JobContext(self.id, self.type, self.queue, self.attempt, self.max_attempts)

    @property
    def attempts_left(self) -> bool:
        return self.attempt < self.max_attempts
