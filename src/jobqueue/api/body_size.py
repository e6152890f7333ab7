"""Refuses request bodies over the size limit before reading them into memory."""

from __future__ import annotations

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobqueue.api.errors import field_error


class BodyLimit:
    """The exact per-payload check is the route's; this one only caps memory."""

    def __init__(self, app: ASGIApp, max_request_bytes: int) -> None:
        self.app = app
        self.limit = max_request_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.limit:
                raise self.too_large()
            return message

        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                # Raised inside the app so that its error handling answers it.
                async def refuse() -> Message:
                    raise self.too_large()

                await self.app(scope, refuse, send)
                return
        await self.app(scope, limited, send)

    def too_large(self) -> HTTPException:
        return HTTPException(
            413,
            detail=[
                field_error(
                    ["body"],
                    f"request body is over {self.limit} bytes (JOBQUEUE_MAX_REQUEST_BYTES)",
                    "too_large",
                )
            ],
        )
