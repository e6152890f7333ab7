"""The Audit page's source: the HTTP API's ``GET /audit``, asked in this process.

The dashboard does not read the audit table itself: it asks the API application it
is mounted in, with the session's token as the bearer, so that the API's own checks
(the admin scope) and its paging decide what is shown. No network is involved: the
request is one ASGI call. Mounted in an application with no such API, the page says
the audit log is not available.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.types import ASGIApp, Message

PAGE_SIZE = 50


@dataclass(frozen=True)
class AuditPage:
    status: int  # the API's answer: 200, or 403, 404 (no audit log in this version)...
    entries: list[dict[str, Any]]
    next_after: int | None
    detail: str | None = None


async def read(api: ASGIApp, *, token: str | None, client: str, after: int | None) -> AuditPage:
    query = {"limit": PAGE_SIZE, **({} if after is None else {"after": after})}
    status, body = await get(api, "/audit", urlencode(query), token=token, client=client)
    if status != 200 or not isinstance(body, dict):
        detail = body.get("detail") if isinstance(body, dict) else None
        return AuditPage(status, [], None, detail if isinstance(detail, str) else None)
    # The list is the answer's one field that holds a list of entries.
    listed = next((v for v in body.values() if isinstance(v, list)), [])
    entries = [e for e in listed if isinstance(e, dict)]
    next_after = body.get("next_after")
    return AuditPage(200, entries, next_after if isinstance(next_after, int) else None)


async def get(
    app: ASGIApp, path: str, query: str, *, token: str | None, client: str
) -> tuple[int, Any]:
    """One GET through ``app`` in this process; (status, the JSON body or None)."""
    headers = [(b"accept", b"application/json")]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": headers,
        "client": (client, 0),
        "server": ("jobqueue-ui", 0),
    }
    answer: dict[str, Any] = {"status": 500, "body": b""}

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    await app(scope, receive, send)
    try:
        return answer["status"], json.loads(answer["body"] or b"null")
    except ValueError:
        return answer["status"], None
