"""Signing in and out: the token form (GET and POST /login) and POST /logout.

A token is checked as the HTTP API checks one (the shared Authenticator), and must
hold the read scope; the session cookie then carries it (jobqueue.auth.session).
These POSTs check the CSRF token like every other, but act as nobody yet: the API
has nothing to do for them.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import HTMLResponse

from jobqueue.auth import session
from jobqueue.model.tokens import Scope
from jobqueue.ui.actions import first, form
from jobqueue.ui.rendering import render, within

router = APIRouter()


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request) -> HTMLResponse:
    is_open = session.authenticator(request).is_open
    return render(request, "login.html", None, live=False, is_open=is_open, problem=None)


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    fields = await form(request)
    session.check_csrf(request, first(fields, session.CSRF_FIELD))
    token = (first(fields, "token") or "").strip()
    problem = None
    if not token:
        problem = "Paste an API token."
    else:
        header = f"Bearer {token}"
        try:
            who = await session.authenticator(request).authenticate(
                header, session.client_of(request), None
            )
        except HTTPException as exc:
            problem = str(exc.detail)
        else:
            if not who.has(Scope.READ):
                problem = f"This token lacks the scope {Scope.READ}, which the dashboard needs."
    if problem is not None:
        return render(request, "login.html", None, 401, live=False, is_open=False, problem=problem)
    response = within(request, "/", "/")
    session.sign_in(request, response, token)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    fields = await form(request)
    session.check_csrf(request, first(fields, session.CSRF_FIELD))
    response = within(request, "/login", "/login")
    session.sign_out(request, response)
    return response
