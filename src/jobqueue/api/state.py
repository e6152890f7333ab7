"""What the routes read of the application's state, which create_app (api/asgi.py) sets."""

from __future__ import annotations

from fastapi import Request

from jobqueue.app import JobQueue


def jobqueue(request: Request) -> JobQueue:
    """The JobQueue the application serves."""
    jq: JobQueue = request.app.state.jobqueue
    return jq
