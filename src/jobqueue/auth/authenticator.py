"""Authentication of HTTP requests: the bearer token, its scopes and restrictions.

Every route declares the scope it needs with ``require``; the route receives the
:class:`~jobqueue.model.tokens.Principal` it acts as. The tokens are read from the database
at most every REFRESH_SECONDS and checked in memory: a request costs a hash and a dict
lookup, and a token revoked in one API process counts in every other within
MAX_AGE_SECONDS. A token whose key id the view lacks has the tokens read again before
it is refused (REREAD_SECONDS), so a token just created works at once everywhere
(docs/security.md).
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, HTTPException, Request, Security
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from jobqueue.auth import tokens
from jobqueue.db.pool import error_text
from jobqueue.db.store import Store
from jobqueue.logs import get_logger
from jobqueue.model.tokens import ADMIN_TOKEN_NAME, ALL_SCOPES, OPEN, Principal, Scope, StoredToken

if TYPE_CHECKING:
    from prometheus_client import Metric

log = get_logger("jobqueue.api")

# An API process rereads the tokens once its view of them is REFRESH_SECONDS old,
# in the background while the view is younger than MAX_AGE_SECONDS, and before
# answering once it is older: so a token revoked MAX_AGE_SECONDS ago is refused by
# every process, however the rereads fell, for one small query per REFRESH_SECONDS
# of requests. A request that waits for a reread is answered 503 after
# REFRESH_WAIT_SECONDS (the database is unreachable), rather than with a stale view.
REFRESH_SECONDS = 0.5
MAX_AGE_SECONDS = 1.0
REFRESH_WAIT_SECONDS = 2.0
# A token of ours whose key id the view lacks may have been created since the view was
# read (by `jobqueue tokens create`, or another process): before refusing it, a request
# waits for a read that began after it arrived. One read runs at a time, shared by
# every request that waits, and one begins at least REREAD_SECONDS after the one before:
# made-up key ids, however many and from however many addresses, cost at most one small
# query per REREAD_SECONDS, and a new token's first request waits at most that long.
REREAD_SECONDS = 0.1
# Why the tokens were read: jobqueue_api_token_reads_total's ``reason`` label.
READ_REASONS = ("refresh", "unknown_key")
# The window of JOBQUEUE_AUTH_MAX_FAILURES. A secret of 256 bits cannot be guessed at
# any rate; the limit keeps scanners and a client with a stale token from hammering.
FAILURE_WINDOW_SECONDS = 60.0
SCHEME = "bearerAuth"


class TokensUnavailable(Exception):
    """The tokens could not be read in time: the database is unreachable (a 503)."""


class Unauthorized(HTTPException):
    """401: no usable token. ``error`` is RFC 6750's code for WWW-Authenticate."""

    def __init__(self, detail: str, error: str | None = "invalid_token") -> None:
        challenge = "Bearer" if error is None else f'Bearer error="{error}"'
        super().__init__(401, detail=detail, headers={"WWW-Authenticate": challenge})


class UnknownKey(Unauthorized):
    """401 for a token of ours whose key id the view lacks, unless a newer view has it."""

    def __init__(self) -> None:
        super().__init__("unknown token")


@dataclass
class Failures:
    """Recent failed authentications of each client address (this process only)."""

    limit: int
    times: dict[str, deque[float]] = field(default_factory=dict)

    def refused_for(self, client: str, now: float) -> float | None:
        """Seconds until ``client`` may try again, or None if it may now."""
        seen = self.times.get(client)
        if seen is None:
            return None
        while seen and seen[0] <= now - FAILURE_WINDOW_SECONDS:
            seen.popleft()
        if not seen:
            del self.times[client]
            return None
        if len(seen) < self.limit:
            return None
        return seen[0] + FAILURE_WINDOW_SECONDS - now

    def add(self, client: str, now: float) -> None:
        self.times.setdefault(client, deque()).append(now)
        if len(self.times) > 100_000:  # a flood of addresses must not exhaust memory
            self.times.pop(next(iter(self.times)))


class Authenticator:
    """What one API process knows of the tokens, and how it checks a request."""

    def __init__(
        self,
        store: Callable[[], Any],
        *,
        open_without_tokens: bool,
        admin_secret: str | None,
        max_failures: int,
    ) -> None:
        """``store``: an awaitable factory of the Store to read tokens with.
        ``open_without_tokens``: with no token at all, let every request through (a
        loopback bind, or --insecure-no-auth); else refuse them all."""
        self._store = store
        self.open_without_tokens = open_without_tokens
        self._admin_digest = None if admin_secret is None else tokens.digest(admin_secret)
        self._tokens: dict[str, StoredToken] = {}
        self._loaded_at: float | None = None  # when the read of the view began
        self._loading: asyncio.Task[None] | None = None  # the read in flight, or the last
        self._loading_started = -math.inf  # when that read began
        self.failures = Failures(limit=max_failures)
        # Reads of the tokens by READ_REASONS, for /metrics.
        self.reads: collections.Counter[str] = collections.Counter()

    async def principal(self, request: Request, scope: Scope) -> Principal:
        """Who the request acts as, by its Authorization header."""
        client = request.client.host if request.client else "unknown"
        return await self.authenticate(request.headers.get("authorization"), client, scope)

    async def authenticate(
        self, authorization: str | None, client: str, scope: Scope | None
    ) -> Principal:
        """Who ``authorization`` (``Bearer <token>``, or None) acts as, from ``client``;
        ``scope``: the scope it must hold (None: any valid token). Raises the 401, 403
        or 429 to answer; a 401 counts against the client's failure limit."""
        now = time.monotonic()
        wait = self.failures.refused_for(client, now)
        if wait is not None:
            raise HTTPException(
                429,
                detail="too many failed authentications from this address; retry later",
                headers={"Retry-After": str(max(1, int(wait + 0.999)))},
            )
        await self._fresh(now)
        try:
            try:
                who = self._check(authorization, client)
            except UnknownKey:
                await self._read_since(now)
                who = self._check(authorization, client)
        except Unauthorized:
            self.failures.add(client, now)
            raise
        if scope is not None and not who.has(scope):
            raise HTTPException(
                403,
                detail=f"this token lacks the scope {scope}",
                headers={"WWW-Authenticate": f'Bearer error="insufficient_scope" scope="{scope}"'},
            )
        return who

    @property
    def is_open(self) -> bool:
        return self.open_without_tokens and self._admin_digest is None and not self._tokens

    def _check(self, authorization: str | None, client: str) -> Principal:
        if self.is_open:
            return Principal(name=OPEN.name, scopes=OPEN.scopes, client=client)
        if authorization is None:
            raise Unauthorized("a token is required: Authorization: Bearer <token>", error=None)
        kind, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if kind.lower() != "bearer" or not token:
            raise Unauthorized("malformed Authorization header: Bearer <token>", "invalid_request")
        if self._admin_digest is not None and tokens.matches(token, self._admin_digest):
            return Principal(name=ADMIN_TOKEN_NAME, scopes=ALL_SCOPES, client=client)
        parts = tokens.split(token)
        if parts is None:
            raise Unauthorized("unknown token")
        stored = self._tokens.get(parts[0])
        if stored is None:
            raise UnknownKey
        if not tokens.matches(parts[1], stored.secret_hash):
            raise Unauthorized("unknown token")
        if stored.revoked_at is not None:
            raise Unauthorized("the token was revoked")
        if stored.expires_at is not None and stored.expires_at <= datetime.now(UTC):
            raise Unauthorized("the token expired")
        return Principal(
            name=stored.name,
            scopes=stored.scopes,
            queues=stored.queues,
            types=stored.types,
            client=client,
        )

    async def _fresh(self, now: float) -> None:
        """See REFRESH_SECONDS. Concurrent requests share one read."""
        age = None if self._loaded_at is None else now - self._loaded_at
        if age is not None and age < REFRESH_SECONDS:
            return
        loading = self._loading
        if loading is None or loading.done():
            loading = self._read("refresh")
        if age is not None and age < MAX_AGE_SECONDS:
            return
        try:
            await asyncio.wait_for(asyncio.shield(loading), REFRESH_WAIT_SECONDS)
        except Exception as exc:
            raise TokensUnavailable(error_text(exc)) from exc

    async def _read_since(self, arrived: float) -> None:
        """Wait for a view read after ``arrived``: see REREAD_SECONDS."""
        try:
            await asyncio.wait_for(self._await_read_since(arrived), REFRESH_WAIT_SECONDS)
        except Exception as exc:
            raise TokensUnavailable(error_text(exc)) from exc

    async def _await_read_since(self, arrived: float) -> None:
        while self._loaded_at is None or self._loaded_at < arrived:
            loading = self._loading
            if loading is not None and not loading.done():
                if self._loading_started >= arrived:
                    await asyncio.shield(loading)  # its failure is this request's 503
                else:  # it began too early to see the token: the next one, then
                    await asyncio.wait([loading])
                continue
            pause = self._loading_started + REREAD_SECONDS - time.monotonic()
            if pause > 0:
                await asyncio.sleep(pause)
                continue
            self._read("unknown_key")

    def _read(self, reason: str) -> asyncio.Task[None]:
        """Start reading the tokens; the caller knows no read is in flight."""
        started = time.monotonic()
        self.reads[reason] += 1
        self._loading_started = started
        self._loading = asyncio.ensure_future(self._load(started))
        self._loading.add_done_callback(_log_failure)
        return self._loading

    def invalidate(self) -> None:
        """Reread the tokens before the next check: this process changed them."""
        self._loaded_at = None

    async def _load(self, started: float) -> None:
        store: Store = await self._store()
        rows = await store.tokens_list()
        self._tokens = {t.key_id: t for t in rows}
        self._loaded_at = started  # the view is as old as the read's start

    def collect(self) -> Iterator[Metric]:
        """jobqueue_api_token_reads_total, for prometheus-client (a collector)."""
        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily(
            "jobqueue_api_token_reads",
            "Reads of the API tokens by this process: refresh (its view was old) or "
            "unknown_key (a request named a key id it lacked).",
            labels=["reason"],
        )
        for reason in READ_REASONS:
            family.add_metric([reason], self.reads[reason])
        yield family


def _log_failure(loading: asyncio.Task[None]) -> None:
    failure = None if loading.cancelled() else loading.exception()
    if failure is not None:
        log.warning("Cannot read the API tokens", error=error_text(failure))


def require(scope: Scope) -> Any:
    """A dependency: the request's principal, once it is known to hold ``scope``."""

    async def authenticate(request: Request) -> Principal:
        authenticator: Authenticator = request.app.state.auth
        return await authenticator.principal(request, scope)

    authenticate.scope = scope  # type: ignore[attr-defined]  # read by document()
    return Security(authenticate)


AUTH_RESPONSES: dict[int, dict[str, Any]] = {
    401: {"description": "No token, a malformed, unknown, expired or revoked one"},
    403: {"description": "The token lacks the route's scope, or its queue or type"},
    429: {"description": "Too many failed authentications from this address"},
}


def route_scope(route: APIRoute) -> Scope | None:
    for dependency in route.dependant.dependencies:
        scope = getattr(dependency.call, "scope", None)
        if isinstance(scope, Scope):
            return scope
    return None


def install(app: FastAPI, routers: Iterable[APIRouter]) -> None:
    """Declare the bearer scheme, and each route's scope and auth answers, in the
    OpenAPI document (``routers``: those included in ``app``). Scopes are listed as the
    requirement's roles, which OpenAPI 3.1 allows for schemes other than OAuth2, and
    named in each route's description."""
    scopes = {
        (route.path_format, method.lower()): route_scope(route)
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute)
        for method in route.methods or ()
    }

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, summary=app.summary, routes=app.routes
            )
            schema.setdefault("components", {})["securitySchemes"] = {
                SCHEME: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A token of `jobqueue tokens create` (docs/security.md)",
                }
            }
            for path, operations in schema["paths"].items():
                for method, operation in operations.items():
                    if (path, method) in scopes:
                        _document(operation, scopes[(path, method)])
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _document(operation: dict[str, Any], scope: Scope | None) -> None:
    if scope is None:
        operation["security"] = []
        return
    operation["security"] = [{SCHEME: [str(scope)]}]
    operation["x-scope"] = str(scope)
    operation["responses"] = {
        **operation["responses"],
        **{str(code): answer for code, answer in AUTH_RESPONSES.items()},
    }
    note = f"Scope: `{scope}` (or `admin`)."
    operation["description"] = f"{operation.get('description', '')}\n\n{note}".strip()
