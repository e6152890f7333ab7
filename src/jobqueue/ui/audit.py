"""The Audit page's source: the HTTP API's ``GET /audit``, asked in this process.

The dashboard does not read the audit table itself: it asks the API application
(jobqueue.ui.inprocess), with the session's token as the bearer, so that the API's
own checks (the admin scope) and its paging decide what is shown. An API with no
such route (404) means no audit log: the page says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.types import ASGIApp

from jobqueue.ui import inprocess

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
