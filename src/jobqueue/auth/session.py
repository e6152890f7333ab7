"""The dashboard's session: an API token in a cookie, and the CSRF token of each form.

Signing in stores the API token itself in an HttpOnly, SameSite=Strict cookie (Secure
when the page came over https, or from a trusted proxy that says so: the scheme is the
forwarded one, see jobqueue.api.http), so every request is checked against the tokens as the
API checks a bearer token: a revoked token signs its sessions out within the
Authenticator's refresh, on every process, with no session table to keep. Scripts
cannot read the cookie, and no other site's page can send it.

Every POST carries a CSRF token: an HMAC of the session's secret (the API token, or
before sign-in and while the API is open, a random per-browser cookie), compared in
constant time. A page of another origin can neither read it nor compute it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from fastapi import HTTPException, Request, Response

from jobqueue.auth.authenticator import Authenticator
from jobqueue.model.tokens import Principal, Scope

SESSION_COOKIE = "jobqueue_session"
# The CSRF secret of a browser with no session (the sign-in form, an open dashboard).
BROWSER_COOKIE = "jobqueue_browser"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
# A session lasts as long as its token, or until sign-out; the browser forgets the
# cookie after this many seconds of not being renewed by a sign-in.
SESSION_SECONDS = 12 * 3600


class SignInNeeded(Exception):
    """No usable session: the page sends the browser to the sign-in form."""


def base_path(request: Request) -> str:
    """Where the dashboard is mounted (``/ui``, ``/jobs``...), for links and cookies."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def client_of(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def authenticator(request: Request) -> Authenticator:
    auth: Authenticator = request.app.state.auth
    return auth


async def principal(request: Request, scope: Scope | None = Scope.READ) -> Principal:
    """Who the request acts as, by its session cookie (or the open API). Raises
    SignInNeeded with no usable token, HTTPException 403 or 429 as the API would."""
    token = request.cookies.get(SESSION_COOKIE)
    header = None if token is None else f"Bearer {token}"
    try:
        return await authenticator(request).authenticate(header, client_of(request), scope)
    except HTTPException as exc:
        if exc.status_code == 401:
            raise SignInNeeded from exc
        raise


def csrf_token(request: Request) -> str:
    """The CSRF token of this browser's session; "" if it has no secret yet (the
    response then sets one: see ensure_browser_secret)."""
    secret = request.cookies.get(SESSION_COOKIE) or request.cookies.get(BROWSER_COOKIE)
    if secret is None:
        secret = request.state.new_browser_secret
    return hmac.new(secret.encode(), b"jobqueue-ui-csrf", hashlib.sha256).hexdigest()


def prepare(request: Request) -> None:
    """Give a browser with no secret one, before its page is rendered with a CSRF token."""
    request.state.new_browser_secret = (
        None if request.cookies.get(BROWSER_COOKIE) else secrets.token_urlsafe(32)
    )


def check_csrf(request: Request, sent: str | None) -> None:
    """403 unless ``sent`` (the form field or the header) is this session's token."""
    sent = sent or request.headers.get(CSRF_HEADER)
    secret = request.cookies.get(SESSION_COOKIE) or request.cookies.get(BROWSER_COOKIE)
    if not sent or secret is None:
        raise HTTPException(403, detail="missing CSRF token: reload the page and try again")
    expected = hmac.new(secret.encode(), b"jobqueue-ui-csrf", hashlib.sha256).hexdigest()
    if not hmac.compare_digest(sent.encode(), expected.encode()):
        raise HTTPException(403, detail="wrong CSRF token: reload the page and try again")


def _cookie(request: Request, response: Response, name: str, value: str, max_age: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=base_path(request) or "/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def set_browser_secret(request: Request, response: Response) -> None:
    secret = getattr(request.state, "new_browser_secret", None)
    if secret is not None:
        _cookie(request, response, BROWSER_COOKIE, secret, 365 * 86400)


def sign_in(request: Request, response: Response, token: str) -> None:
    _cookie(request, response, SESSION_COOKIE, token, SESSION_SECONDS)


def sign_out(request: Request, response: Response) -> None:
    response.delete_cookie(
        SESSION_COOKIE,
        path=base_path(request) or "/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
