"""Refused requests (403) in the audit log, at most one row per token, route and minute.

A 403 answers a valid token that asked for what it may not do: a scope it lacks, or a
queue or type out of its reach. That is worth an auditor's eye, whether it is a client
set up with the wrong token or a token probing what it can reach. But a client that
retries in a loop must not write a row per request: the rows would bury the actions
the log exists for, and every refused request would cost a write.

So the first refusal of a token on a route (method and path template) writes a row,
``request.refused``, that opens a window of WINDOW_SECONDS. The refusals after it in the
window, by the same token on the same route, are counted in memory and added to the
row's ``count`` in one UPDATE when the window ends: the row says how many requests it
stands for. A flood costs at most two statements a window per token and route, and one
row, whatever its rate. Each API process keeps its own windows: N processes write up to
N rows a window. A process that stops writes the counts of its open windows first
(``flush``); one killed loses them (at most WINDOW_SECONDS of refusals, whose first is
recorded).

A 401 (no token, or an unknown, expired or revoked one) is not recorded here: it names
no token to hold to account, and JOBQUEUE_AUTH_MAX_FAILURES already slows its sender.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
from fastapi import Request
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from jobqueue import audit
from jobqueue.auth.access import Forbidden
from jobqueue.auth.authenticator import route_scope
from jobqueue.db.pool import log_failure
from jobqueue.db.store import Store

log = structlog.get_logger("jobqueue.api")

# One row per token and route per minute: a refusal is seen in the log at once, and a
# flood of them adds one row a minute. Longer writes fewer rows for a long flood and
# keeps its count unwritten longer; shorter, the reverse.
WINDOW_SECONDS = 60.0
# The windows one process remembers (a few bytes each). Tokens times routes bound them
# far below this; past it, the oldest is forgotten, its count written first.
MAX_WINDOWS = 10_000


@dataclass
class Window:
    """One token's refusals on one route since its row was written."""

    ends: float
    row: int | None = None  # the row's id, once written
    unwritten: int = 0  # refusals after the first, not yet added to the row's count
    timer: asyncio.TimerHandle | None = None


class RefusalLog:
    """Writes the audit rows of one API process's refusals (``app.state.refusals``)."""

    def __init__(
        self, store: Callable[[], Awaitable[Store]], window_seconds: float = WINDOW_SECONDS
    ) -> None:
        self._store = store
        self.window_seconds = window_seconds
        self._windows: dict[tuple[str, str], Window] = {}
        self._writing: set[asyncio.Task[None]] = set()

    async def record(self, request: Request, exc: HTTPException) -> None:
        """Record the 403 ``exc`` answers ``request`` with (never raises: the refusal is
        answered whether or not its row could be written)."""
        route = request.scope.get("route")
        template = route.path if isinstance(route, APIRoute) else request.url.path
        if isinstance(exc, Forbidden):
            refused = exc.refused
        else:  # auth/authenticator.py's: the token lacks the route's scope
            scope = route_scope(route) if isinstance(route, APIRoute) else None
            refused = "scope" if scope is None else f"scope={scope}"
        client = request.client.host if request.client else "unknown"
        await self.refused(
            actor=await actor(request, client),
            client=client,
            route=f"{request.method} {template}",
            target=f"{request.method} {request.url.path}",
            result=f"forbidden:{refused}",
        )

    async def refused(
        self, *, actor: str, client: str | None, route: str, target: str, result: str
    ) -> None:
        """One refusal of ``actor`` on ``route``: a row, or one more in its window's."""
        now = time.monotonic()
        key = (actor, route)
        window = self._windows.get(key)
        if window is not None and now < window.ends:
            window.unwritten += 1
            if window.timer is None:
                loop = asyncio.get_running_loop()
                window.timer = loop.call_later(window.ends - now, self._write_later, window)
            return
        self._windows.pop(key, None)  # to the end: the dict stays oldest first
        self._windows[key] = opened = Window(ends=now + self.window_seconds)
        if len(self._windows) > MAX_WINDOWS:
            self._write_later(self._windows.pop(next(iter(self._windows))))
        try:
            store = await self._store()
            opened.row = await audit.record(
                store,
                actor=actor,
                client=client,
                action=audit.Action.REQUEST_REFUSED,
                target=target,
                count=1,
                result=result,
            )
        except Exception as exc:
            log_failure(log, exc, "recording a refusal failed", "refusal not recorded")

    def _write_later(self, window: Window) -> None:
        if window.timer is not None:
            window.timer.cancel()
            window.timer = None
        if window.unwritten:
            task = asyncio.ensure_future(self._write(window))
            self._writing.add(task)
            task.add_done_callback(self._writing.discard)

    async def _write(self, window: Window) -> None:
        added, window.unwritten = window.unwritten, 0
        if window.row is None:  # its first refusal could not be recorded
            return
        try:
            store = await self._store()
            await store.audit_count(entry_id=window.row, add=added)
        except Exception as exc:
            log_failure(log, exc, "recording refusals failed", "refusals not counted")

    async def flush(self) -> None:
        """End every window now, its unwritten refusals added to its row (at shutdown;
        and in tests, which cannot wait a window out)."""
        windows, self._windows = self._windows, {}
        for window in windows.values():
            self._write_later(window)
        while self._writing:
            await asyncio.gather(*self._writing)


async def actor(request: Request, client: str) -> str:
    """The name of the token a refused request used, as the audit log records it."""
    try:
        who = await request.app.state.auth.authenticate(
            request.headers.get("authorization"), client, None
        )
    except Exception:  # revoked or expired since: it was refused all the same
        return "unknown"
    name: str = who.actor
    return name
