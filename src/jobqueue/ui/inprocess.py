"""Requests to the HTTP API application in this process: one ASGI call, no network.

The dashboard's actions (retry, cancel, pause, resume, by job or by filter) and its
Audit page go through the API's own routes, with the session's token as the bearer
and the browser's address as the client: the API's scope checks, its token
restrictions and whatever it records of each action apply to the dashboard exactly
as to any client, with no second implementation to keep in step.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message


async def call(
    app: ASGIApp,
    method: str,
    path: str,
    *,
    token: str | None,
    client: str,
    query: str = "",
    body: Any = None,
) -> tuple[int, Any]:
    """(status, the JSON body or None) of one request through ``app``."""
    payload = b"" if body is None else json.dumps(body).encode()
    headers = [(b"accept", b"application/json")]
    if body is not None:
        headers += [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(payload)),
        ]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
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
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:  # the body is read; only a disconnect is left to wait for
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": payload, "more_body": False}

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
