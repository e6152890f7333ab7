"""What an operator sees of the jobs: metrics, traces, per-job logs, lifecycle events.

Each is an attempt observer (``attempts.AttemptObserver``) that the executor calls
at the start and the end of every attempt, and that lives in a module of its own
here. ``observers()`` builds the ones the settings turn on; a module whose feature is
off is never imported, so a worker pays nothing, in time or memory, for what it
does not use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobqueue.config import Settings
from jobqueue.observability import trace_context
from jobqueue.observability.attempts import AttemptObserver, Outcome

__all__ = ["AttemptObserver", "Outcome", "observers"]


def observers(settings: Settings, tasks: Mapping[str, Any]) -> list[AttemptObserver]:
    """The attempt observers ``settings`` turn on, for a worker running ``tasks``."""
    found: list[AttemptObserver] = []
    if settings.tracing == "on" or (settings.tracing == "auto" and trace_context.imported()):
        from jobqueue.observability import tracing

        traced = tracing.observer(settings.tracing)
        if traced is not None:
            found.append(traced)
    return found
