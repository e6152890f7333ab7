"""A POST from the dashboard: its form, its CSRF check, and the HTTP API call that
does it.

Every POST checks the CSRF token, then is done by the HTTP API's own route
(jobqueue.ui.inprocess), which checks the scope; the buttons of an action a token may
not take are not shown either. Sign-in and sign-out are the only POSTs the API does
not do: they read the form here, and set the session themselves (jobqueue.ui.login).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from fastapi import HTTPException, Request

from jobqueue.auth import session
from jobqueue.model.tokens import Principal
from jobqueue.ui import inprocess


async def form(request: Request) -> dict[str, list[str]]:
    """The urlencoded form of a POST (no multipart parser needed for these forms)."""
    return parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)


def first(fields: dict[str, list[str]], name: str) -> str | None:
    values = fields.get(name)
    return values[0] if values else None


async def acting(request: Request) -> tuple[Principal, dict[str, list[str]]]:
    """Who a POST acts as, once its CSRF token is checked; the API checks the scope."""
    who = await session.principal(request, None)
    fields = await form(request)
    session.check_csrf(request, first(fields, session.CSRF_FIELD))
    return who, fields


async def act(request: Request, path: str, body: Any = None, method: str = "POST") -> Any:
    """POST (or ``method``) ``path`` to the HTTP API (jobqueue.ui.inprocess) as this
    session; its answer, or its refusal raised as the error page (its 401 as the
    sign-in form)."""
    status, answer = await inprocess.call(
        request.app.state.api,
        method,
        path,
        token=request.cookies.get(session.SESSION_COOKIE),
        client=session.client_of(request),
        body=body,
    )
    if status == 401:
        raise session.SignInNeeded
    if status >= 400:
        detail = answer.get("detail") if isinstance(answer, dict) else None
        if isinstance(detail, list):  # a 422's field errors
            detail = "; ".join(
                str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail
            )
        raise HTTPException(status, detail=str(detail or f"the API answered {status}"))
    return answer
