"""The live stream (GET /events): the server-sent events every open page listens to,
to fetch its content again when jobs change (jobqueue.ui.live, static/ui.js).

The events come from the process's one Hub, whatever the number of browsers; a
stream needs a signed-in session like any page, and ends when the server stops.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from jobqueue.auth import session
from jobqueue.ui.live import Hub

router = APIRouter()


def hub(request: Request) -> Hub:
    found: Hub = request.app.state.hub
    return found


@router.get("/events")
async def events(request: Request) -> StreamingResponse:
    await session.principal(request)
    stopping = request.app.state.stopping
    return StreamingResponse(
        hub(request).events(stopping),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )
