"""The HTTP server that serves the API: uvicorn, without its own signal handling."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI


class HttpServer(uvicorn.Server):
    def __init__(self, app: FastAPI, *, grace_seconds: float) -> None:
        super().__init__(
            uvicorn.Config(
                app,
                log_config=None,
                timeout_graceful_shutdown=int(grace_seconds),
                lifespan="off",
            )
        )

    # The process handles signals itself: the workers drain before HTTP stops.
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
