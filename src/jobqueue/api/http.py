"""The HTTP server that serves the API: uvicorn, without its own signal handling."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import uvicorn
from starlette.types import ASGIApp

from jobqueue.tls import TlsFiles


class HttpServer(uvicorn.Server):
    def __init__(
        self,
        app: ASGIApp,
        *,
        grace_seconds: float,
        tls: TlsFiles | None,
        trusted_proxies: Sequence[str] | None = None,
    ) -> None:
        """``trusted_proxies``: JOBQUEUE_TRUSTED_PROXIES. uvicorn's ProxyHeadersMiddleware
        takes a request from one of them as its X-Forwarded-Proto and X-Forwarded-For
        say, outside every other middleware, so the scheme (the dashboard's Secure
        cookies) and the client address (the audit log, the failure limit) are the
        forwarded ones everywhere. None: the headers are ignored from every address,
        not only trusted from loopback as uvicorn would by default (any local process
        could then claim any client address)."""
        super().__init__(
            uvicorn.Config(
                app,
                log_config=None,
                timeout_graceful_shutdown=int(grace_seconds),
                lifespan="off",
                ssl_certfile=tls.cert if tls else None,
                ssl_keyfile=tls.key if tls else None,
                proxy_headers=bool(trusted_proxies),
                forwarded_allow_ips=list(trusted_proxies or ()),
            )
        )

    # The process handles signals itself: the workers drain before HTTP stops.
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
