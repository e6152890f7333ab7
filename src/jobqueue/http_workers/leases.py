"""A lease: what a claim over HTTP hands a worker for one job, and what each of its
writes about that job (heartbeat, complete, fail) names.

It is ``<job id>.<claim token>.<worker>``, opaque to clients. The claim token is the
one every claim draws (migration 0022): it names one claim of one attempt. The worker
id the job is held by is made of the claiming token's name and the worker's, so that
a write with the lease under another token names another worker and is fenced out,
as a write from a stale worker is.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import NamedTuple

from jobqueue.db.records import ClaimedJob
from jobqueue.model.tokens import Principal

# A worker's name: what GET /workers shows after its token's name.
WORKER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
BIGINT_MAX = 2**63 - 1


class Lease(NamedTuple):
    """A tuple, not a frozen dataclass: one is made for each job of a claim and parsed
    for each outcome, and a frozen dataclass sets each field through
    object.__setattr__ (bench/budget.py http_work)."""

    job_id: int
    claim: int
    worker: str

    def __str__(self) -> str:
        return f"{self.job_id}.{self.claim}.{self.worker}"

    @classmethod
    def of(cls, text: str) -> Lease:
        """The lease ``text`` spells, ``text`` known to be one (a request's model checked
        it): no second look at its form."""
        job_id, claim, worker = text.split(".", 2)
        return cls(int(job_id), int(claim), worker)

    def held(self) -> ClaimedJob:
        """The job as the fenced writes name it: by its id and its claim's token, which
        are all they read of it."""
        return ClaimedJob(self.job_id, "", "", {}, 0, 0, 0, _EPOCH, claim=self.claim)


def worker_id(who: Principal, worker: str) -> str:
    """The id an HTTP worker holds its jobs by: its token's name and its own."""
    return f"http:{who.actor}:{worker}"
