"""A fake of the part of the store that the producer claims through and the completer
writes through: it records each statement it is asked to run, hands out the jobs a
test put in ``due`` in their order, refuses what a test tells it to refuse (a fence
that no longer holds), and fails while a test says the database is down. A test
helper, not a second queue: no lease, no retry, no state but what a test sets."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobqueue.db.records import ClaimedJob, ClaimKey, Failure


@dataclass
class Written:
    kind: str  # "complete", "cancel", "fail", "release"
    ids: list[int]


class FakePool:
    def get_max_size(self) -> int:
        return 1


@dataclass
class Claimed:
    queue: str
    limit: int
    resume_at: ClaimKey | None
    types: tuple[str, ...] | None


@dataclass
class FakeStore:
    due: dict[str, list[ClaimedJob]] = field(default_factory=dict)  # per queue, in order
    claims: list[Claimed] = field(default_factory=list)
    written: list[Written] = field(default_factory=list)
    results: dict[int, Any] = field(default_factory=dict)
    refuse: set[int] = field(default_factory=set)  # ids whose fence no longer holds
    down: int = 0  # how many statements to fail, as an unreachable database does
    outage_met: asyncio.Event = field(default_factory=asyncio.Event)  # one of them failed
    pool: FakePool = field(default_factory=FakePool)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[FakeStore]:
        yield self

    async def queue_limited(self, *, queues: Sequence[str]) -> dict[str, bool]:
        return {}

    async def claim(
        self,
        *,
        queue: str,
        limit: int,
        worker_id: str,
        lease_seconds: float,
        resume_at: ClaimKey | None = None,
        types: Sequence[str] | None = None,
    ) -> list[ClaimedJob]:
        if self.down:
            self.down -= 1
            self.outage_met.set()
            raise ConnectionRefusedError("the database is down")
        self.claims.append(
            Claimed(queue, limit, resume_at, None if types is None else tuple(types))
        )
        due = self.due.get(queue, [])
        taken, self.due[queue] = due[:limit], due[limit:]
        return taken

    def _write(self, kind: str, jobs: list[ClaimedJob]) -> list[ClaimedJob]:
        if self.down:
            self.down -= 1
            self.outage_met.set()
            raise ConnectionRefusedError("the database is down")
        self.written.append(Written(kind, [j.id for j in jobs]))
        return [j for j in jobs if j.id in self.refuse]

    async def complete(
        self,
        *,
        jobs: list[ClaimedJob],
        worker_id: str,
        status: str,
        results: str | None = None,
        error: str | None = None,
    ) -> list[ClaimedJob]:
        refused = self._write("complete" if status == "completed" else "cancel", jobs)
        if results is not None:
            self.results.update({int(k): v for k, v in json.loads(results).items()})
        return refused

    async def fail(self, *, failures: list[Failure], worker_id: str) -> list[ClaimedJob]:
        return self._write("fail", [f.job for f in failures])

    async def release(self, *, jobs: list[ClaimedJob], worker_id: str) -> list[ClaimedJob]:
        return self._write("release", jobs)
