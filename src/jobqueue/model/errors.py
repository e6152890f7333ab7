"""The errors of the Python API when the database cannot be reached.

``DatabaseUnavailable``: a call could not reach the database (no connection could be
had, the connection was lost, the server is starting up or shutting down, a statement
timed out). Every call of ``JobQueue`` that uses the database raises it, never a
driver's error; the driver's error is its ``cause`` (and ``__cause__``). It is a
``ConnectionError``: retry later.

Enqueueing says more, whether the job may have been stored, so that the caller knows
whether retrying could store it twice. Its errors are ``EnqueueError``s, and so
``DatabaseUnavailable`` too:

``EnqueueFailed``: nothing was stored, because the statement never reached the server
(no connection could be had; jobqueue already retried a few times) or the server
refused it (the statement timed out and was rolled back). Retrying is safe.

``EnqueueOutcomeUnknown``: the connection died after the statement was sent. The
server may have committed it before dying, or not; no one can tell from here, so
jobqueue never resends it. Retrying may store the job twice, unless the job has a
``unique_key`` (or, over HTTP, an ``Idempotency-Key``): then a retry returns the job
the first call stored, if it did, and stores it otherwise.
"""

from __future__ import annotations

from typing import ClassVar, Literal


class DatabaseUnavailable(ConnectionError):
    """The database could not be reached; retry later. ``cause``: the driver's error."""

    @property
    def cause(self) -> BaseException | None:
        """The error that the database's driver (or the network) raised."""
        return self.__cause__


class EnqueueError(DatabaseUnavailable):
    """An enqueue that did not get through to the database; see ``stored``."""

    # False: certainly not stored. "unknown": maybe stored (what the HTTP API says too).
    stored: ClassVar[Literal[False, "unknown"]]


class EnqueueFailed(EnqueueError):
    """Nothing was stored: retrying is safe."""

    stored = False


class EnqueueOutcomeUnknown(EnqueueError):
    """The job may or may not have been stored: retry with a ``unique_key`` to be sure."""

    stored = "unknown"
