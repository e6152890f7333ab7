"""The worker: claims jobs, runs their handlers, writes their outcomes back."""

from jobqueue.worker.worker import Worker

__all__ = ["Worker"]
