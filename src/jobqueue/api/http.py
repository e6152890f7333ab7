"""The HTTP server that serves the API: uvicorn, without its own signal handling."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp

from jobqueue.tls import TlsFiles


class HttpServer(uvicorn.Server):
    def __init__(self, app: ASGIApp, *, grace_seconds: float, tls: TlsFiles | None) -> None:
        super().__init__(
            uvicorn.Config(
                app,
                log_config=None,
                timeout_graceful_shutdown=int(grace_seconds),
                lifespan="off",
                ssl_certfile=tls.cert if tls else None,
                ssl_keyfile=tls.key if tls else None,
            )
        )

    # The process handles signals itself: the workers drain before HTTP stops.
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
