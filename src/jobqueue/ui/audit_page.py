"""The Audit page (GET /audit, admin tokens only): the HTTP API's audit log, newest
first, paged.

The dashboard does not read the audit table itself: it asks the API application's
own ``GET /audit`` in this process (jobqueue.ui.inprocess), with the session's token
as the bearer, so that the API's checks (the admin scope) and its paging decide what
is shown. A token without the admin scope gets the error page (403) before anything
is asked; an API with no such route (404) means no audit log, and the page says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse
from starlette.types import ASGIApp

from jobqueue.auth import session
from jobqueue.model.tokens import Scope
from jobqueue.ui import inprocess
from jobqueue.ui.rendering import render

router = APIRouter()


@router.get("/audit", response_class=HTMLResponse)
async def audit_page(request: Request) -> HTMLResponse:
    who = await session.principal(request)
    if not who.has(Scope.ADMIN):
        raise HTTPException(403, detail=f"the audit log needs the scope {Scope.ADMIN}")
    api = request.app.state.api
    after = request.query_params.get("after")
    page = None
    if api is not None:
        page = await read(
            api,
            token=request.cookies.get(session.SESSION_COOKIE),
            client=session.client_of(request),
            after=int(after) if after and after.isdigit() else None,
        )
    return render(request, "audit.html", who, live=False, page=page)


PAGE_SIZE = 50


@dataclass(frozen=True)
class AuditPage:
    status: int  # the API's answer: 200, or 403, 404 (no audit log in this version)...
    entries: list[dict[str, Any]]
    next_after: int | None
    detail: str | None = None


async def read(api: ASGIApp, *, token: str | None, client: str, after: int | None) -> AuditPage:
    query = {"limit": PAGE_SIZE, **({} if after is None else {"after": after})}
    status, body = await inprocess.call(
        api, "GET", "/audit", query=urlencode(query), token=token, client=client
    )
    if status != 200 or not isinstance(body, dict):
        detail = body.get("detail") if isinstance(body, dict) else None
        return AuditPage(status, [], None, detail if isinstance(detail, str) else None)
    # The list is the answer's one field that holds a list of entries.
    listed = next((v for v in body.values() if isinstance(v, list)), [])
    entries = [e for e in listed if isinstance(e, dict)]
    next_after = body.get("next_after")
    return AuditPage(200, entries, next_after if isinstance(next_after, int) else None)
