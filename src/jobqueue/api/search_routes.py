"""``GET /jobs``: jobs newest first, by state, type, queue, tags, metadata and payload,
a page at a time (jobqueue.model.search, docs/search.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, NoReturn

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError

from jobqueue.api.responses import INVALID, UNAVAILABLE, declare
from jobqueue.api.schemas import JobList
from jobqueue.api.state import jobqueue
from jobqueue.auth import access
from jobqueue.auth.authenticator import require
from jobqueue.enqueue.new_job import StorableText
from jobqueue.model import search
from jobqueue.model.job import JobStatus
from jobqueue.model.tokens import Principal, Scope

router = APIRouter()

# The parameters GET /jobs declares; besides them it reads `meta.KEY` and `payload.KEY`.
DECLARED = frozenset({"status", "type", "queue", "tag", "limit", "after"})


@router.get(
    "/jobs",
    response_model=JobList,
    summary="List and search jobs, newest first",
    responses=declare(
        INVALID,
        UNAVAILABLE,
        {403: {"description": "A payload filter, by a token without the `payloads` scope"}},
    ),
)
async def list_jobs(
    request: Request,
    who: Annotated[Principal, require(Scope.READ)],
    status: Annotated[JobStatus | None, Query(description="Only jobs in this state.")] = None,
    type: Annotated[StorableText | None, Query(description="Only jobs of this type.")] = None,
    queue: Annotated[StorableText | None, Query(description="Only jobs in this queue.")] = None,
    tag: Annotated[
        list[str] | None,
        Query(description="Only jobs with this tag; repeated, with every one of them."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500, description="Page size.")] = 50,
    after: Annotated[
        int | None,
        Query(ge=1, le=2**63 - 1, description="Cursor: `next_after` of the previous page."),
    ] = None,
) -> JobList:
    """Jobs newest first, filtered by state, type, queue and tags (`?status=failed`
    lists the dead letters), and by two more kinds of parameter:

    - `meta.KEY=VALUE`: jobs whose metadata has VALUE at KEY (`meta.customer=acme`);
    - `payload.KEY=VALUE`: the same of the payload; needs the `payloads` scope.

    KEY may be a dotted path into nested objects (`payload.user.id=42`). VALUE is a
    JSON number, `true`, `false` or `null` as that value, a double-quoted JSON string as
    its text, and anything else as text: `user_id=42` finds the number, `user_id="42"`
    the string. Tags and metadata are found through their indexes. The payload has
    none: a payload filter reads at most `scan_limit` jobs newest first, and an answer
    that stopped there has `truncated: true`; its `next_after` reads on. Pass
    `next_after` from one page as `after` to get the next."""
    where = _filter(request.query_params.multi_items(), tag)
    if where.payload is not None and not who.has(Scope.PAYLOADS):
        raise HTTPException(403, "a payload filter needs the payloads scope: this token "
                            "is not shown payloads")  # fmt: skip
    scope = access.reach(who, queue=queue, type=type)
    if scope is None:
        return JobList(jobs=[])
    queues, types = scope
    where = search.JobFilter(status, types, queues, where.tags, where.meta, where.payload)
    page = await jobqueue(request).inspect.jobs(where, after=after, limit=limit)
    return JobList(
        jobs=[access.shown(job, who) for job in page.jobs],
        next_after=page.next_after,
        truncated=page.truncated,
        scan_limit=None if where.payload is None else search.PAYLOAD_SCAN_ROWS,
    )


def _filter(params: Iterable[tuple[str, str]], tags: list[str] | None) -> search.JobFilter:
    """The tag, metadata and payload filters of the query; RequestValidationError
    names the parameter that is wrong, or one that GET /jobs does not take."""
    meta: list[tuple[str, str]] = []
    payload: list[tuple[str, str]] = []
    for name, value in params:
        if name.startswith("meta."):
            meta.append((name.removeprefix("meta."), value))
        elif name.startswith("payload."):
            payload.append((name.removeprefix("payload."), value))
        elif name not in DECLARED:
            _refuse(name, "is not a parameter of GET /jobs; filters are status, type, "
                    "queue, tag, meta.KEY and payload.KEY")  # fmt: skip
    field = "tag"
    try:
        checked = search.check_tags(tags)
        field = "meta"
        by_meta = search.containment(meta, field)
        field = "payload"
        by_payload = search.containment(payload, field)
    except ValueError as exc:
        _refuse(field, str(exc))
    return search.JobFilter(tags=checked, meta=by_meta, payload=by_payload)


def _refuse(name: str, message: str) -> NoReturn:
    raise RequestValidationError(
        [{"loc": ("query", name), "msg": message, "type": "value_error", "input": None}]
    )
