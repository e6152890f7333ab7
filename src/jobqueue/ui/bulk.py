""" "Retry / cancel all that match this filter": what it touches, and how many.

The confirmation shows the count before anything is done. With no type filter it
comes from the queue counters (kept by triggers, a few rows whatever the table's
size). With a type filter, no counter has it: the jobs are counted up to COUNT_LIMIT
only, and the confirmation says "over COUNT_LIMIT" past that, so the page never
counts millions of rows. The action itself runs in batches (jobqueue.control).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobqueue.app import JobQueue
from jobqueue.auth import access
from jobqueue.model.job import JobStatus
from jobqueue.model.tokens import Principal

COUNT_LIMIT = 10_000

ACTIONS = {
    "retry": (JobStatus.FAILED, JobStatus.CANCELLED),
    "cancel": (JobStatus.PENDING, JobStatus.RUNNING),
}


@dataclass(frozen=True)
class Matched:
    count: int
    exact: bool  # False: at least ``count`` (the bounded count stopped there)

    def __str__(self) -> str:
        return f"{self.count:,}" if self.exact else f"over {COUNT_LIMIT:,}"


def statuses(action: str, status: JobStatus | None) -> tuple[JobStatus, ...]:
    """The states the action touches: a retry's narrowed to ``status`` when it is one
    of them; a cancel takes pending and running jobs alike (as POST /jobs/cancel)."""
    allowed = ACTIONS[action]
    if status is None:
        return allowed
    if status not in allowed:
        return ()
    return (status,) if action == "retry" else allowed


async def count(
    jq: JobQueue,
    who: Principal,
    *,
    action: str,
    status: JobStatus | None,
    queue: str | None,
    type: str | None,
) -> Matched:
    states = statuses(action, status)
    scope = access.reach(who, queue=queue, type=type)
    if not states or scope is None:
        return Matched(0, True)
    queues, types = scope
    if types is None:
        total = sum(
            getattr(q, str(s))
            for q in await jq.queues()
            if queues is None or q.name in queues
            for s in states
        )
        return Matched(total, True)
    n = await jq.inspect.jobs_count(
        statuses=[str(s) for s in states], types=types, queues=queues, limit=COUNT_LIMIT + 1
    )
    return Matched(min(n, COUNT_LIMIT), n <= COUNT_LIMIT)


def api_request(
    action: str, *, status: JobStatus | None, queue: str | None, type: str | None
) -> tuple[str, dict[str, Any]]:
    """The HTTP API's route and body that do the action (POST /jobs/retry, /jobs/cancel):
    it applies the token's reach, and runs in batches."""
    where: dict[str, Any] = {k: v for k, v in (("queue", queue), ("type", type)) if v}
    if action == "retry":
        return "/jobs/retry", {**where, "statuses": [str(s) for s in statuses(action, status)]}
    return "/jobs/cancel", where
