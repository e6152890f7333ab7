"""Refuses request bodies over the size limit before reading them into memory."""

from __future__ import annotations

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobqueue.api.errors import field_error

# Room for the fields around the payload, so that the exact per-payload check in the
# route, with its precise message, decides all but grossly oversized requests.
ENVELOPE_BYTES = 64 * 1024


class BodyLimit:
    def __init__(self, app: ASGIApp, max_payload_bytes: int) -> None:
        self.app = app
        self.max_payload_bytes = max_payload_bytes
        self.limit = max_payload_bytes + ENVELOPE_BYTES

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
                    ["body", "payload"],
                    f"request body is over {self.limit} bytes; a payload may have at most "
                    f"{self.max_payload_bytes} bytes (JOBQUEUE_MAX_PAYLOAD_BYTES)",
                    "too_large",
                )
            ],
        )
