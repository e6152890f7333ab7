"""``GET /audit``: the audit log of control actions (jobqueue.audit), for admins."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from jobqueue.api.schemas import AuditList
from jobqueue.app import JobQueue
from jobqueue.audit import Action
from jobqueue.auth.authenticator import require
from jobqueue.enqueue.new_job import StorableText
from jobqueue.model.tokens import Principal, Scope

router = APIRouter()


@router.get(
    "/audit",
    response_model=AuditList,
    summary="The audit log, newest first",
    responses={
        401: {"description": "No token, or a token that is unknown, expired or revoked"},
        403: {"description": "The token lacks the `admin` scope"},
        422: {"description": "Invalid query parameter (`actor`, `limit`, `after`, `action`)"},
        503: {"description": "Database unavailable"},
    },
)
async def list_audit(
    request: Request,
    who: Annotated[Principal, require(Scope.ADMIN)],
    actor: Annotated[
        StorableText | None,
        Query(description="Only actions of this token (`cli:<user>`, `anonymous`)."),
    ] = None,
    action: Annotated[Action | None, Query(description="Only this action.")] = None,
    limit: Annotated[int, Query(ge=1, le=500, description="Page size.")] = 50,
    after: Annotated[
        int | None,
        Query(ge=1, le=2**63 - 1, description="Cursor: `next_after` of the previous page."),
    ] = None,
) -> AuditList:
    """Every control action (retries, cancels, pauses, resumes, token changes), refusals
    included: who, what, on which job, queue, token or filter, how many jobs, when, from
    which address, and the result. A request refused for its token (403) is a
    `request.refused` row, at most one a minute per token and route, counting them.
    Pass `next_after` from one page as `after` to get the next."""
    jq: JobQueue = request.app.state.jobqueue
    entries = await jq.inspect.audit_entries(
        actor=actor, action=action, before_id=after, limit=limit
    )
    return AuditList(entries=entries, next_after=entries[-1].id if len(entries) == limit else None)
