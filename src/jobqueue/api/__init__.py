"""The HTTP API."""

from jobqueue.api.asgi import create_app

__all__ = ["create_app"]
