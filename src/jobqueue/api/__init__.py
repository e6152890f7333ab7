"""The HTTP API."""

from jobqueue.api.app import create_app

__all__ = ["create_app"]
